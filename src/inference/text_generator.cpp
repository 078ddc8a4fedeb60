#include "mpiddp/inference/text_generator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "mpiddp/checkpoint/vocabulary.hpp"
#include "mpiddp/checkpoint/weights.hpp"
#include "mpiddp/config/data_source.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/core/rng.hpp"
#include "mpiddp/data/source.hpp"
#include "mpiddp/data/text.hpp"
#include "mpiddp/io/safetensors.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/tokenizer/sentencepiece_tokenizer.hpp"

namespace mpiddp::inference {

namespace {

// Whether some attention layer of the list (nested residuals included) sees later positions:
// such a model cannot continue a text (and its position t's logits would not be the ones of
// the context up to t, which the fixed-width pass below relies on).
bool has_full_attention(const io::Json& layers) {
  for (const io::Json& layer : layers) {
    if (layer.value("type", "") == "attention" && !layer.value("causal", true)) return true;
    if (layer.contains("layers") && layer["layers"].is_array() && has_full_attention(layer["layers"])) return true;
  }
  return false;
}

// What generation needs of a training config: the model, its dtype and the training data's
// source (its block and text file). Read alone, not through the whole config's checks: a
// resolved config holds keys (trace.steps without a path, say) that only training reads.
struct Recipe {
  std::vector<nn::LayerSpec> layers;
  io::Json layer_list;
  std::string dtype;
  data::SourceConfig train_data;
};

Recipe read_recipe(const io::Json& config) {
  Recipe recipe;
  io::JsonSection root(&config, "");
  io::JsonSection model = root.section("model");
  const io::Json* layers = model.raw("layers");
  if (!layers) throw ConfigError("model.layers", "required key is missing");
  recipe.layer_list = *layers;
  recipe.layers = nn::parse_layer_list(*layers, "model.layers");
  recipe.dtype = root.choice("dtype", "float32", {"float32", "float64"});
  io::JsonSection data = root.section("data");
  io::JsonSection train = data.section("train");
  recipe.train_data = config::parse_data_source(train, nn::model_input_kind(recipe.layers));
  return recipe;
}

// The context length: data.train's block, for the text and tokens sources.
Index context_length(const Recipe& recipe) {
  const data::SourceConfig& source = recipe.train_data;
  if (source.source == "text") return source.text.windows.block;
  if (source.source == "tokens") return source.tokens.windows.block;
  throw ConfigError("data.train.source", "generation takes the context length from data.train.block, of a "
                                         "\"text\" or \"tokens\" source, but the model was trained on \"" +
                                             source.source + "\"");
}

// The tokenizer the config's training data name: the text source's, or the tokens source's
// "tokenizer" (null when a tokens source names none).
std::shared_ptr<const tokenizer::Tokenizer> config_tokenizer(const Recipe& recipe) {
  const data::SourceConfig& source = recipe.train_data;
  if (source.source == "text") return data::load_text_tokenizer(source.text);
  if (const std::string& model = data::named_tokenizer(source); !model.empty())
    return tokenizer::SentencePieceTokenizer::load(model);
  return nullptr;
}

// The tokenizer the file carries; without one, the config's. With a config of the user's
// whose tokenizer is not the one the weights were trained with, the ids would mean other text.
std::shared_ptr<const tokenizer::Tokenizer> tokenizer_of(const io::SafetensorsFile& file, const Recipe& recipe,
                                                         bool users_config) {
  std::shared_ptr<const tokenizer::Tokenizer> carried = checkpoint::read_tokenizer(file, kExitData);
  if (carried && !users_config) return carried;
  const data::SourceConfig& source = recipe.train_data;
  const auto disagree = [&](const std::string& key, const std::string& configured) {
    throw ConfigError(key, "'" + file.name() + "' was trained with " + checkpoint::tokenizer_summary(carried->description()) +
                               ", but --config's data are encoded by " + configured);
  };
  // "chars" needs the text file, which may be elsewhere now: the carried bytes serve, as long
  // as the config encodes characters or bytes too.
  if (carried && data::named_tokenizer(source).empty()) {
    if (source.source == "text" && carried->encoding() != source.text.encoding)
      disagree("data.train.encoding", "\"" + source.text.encoding + "\"");
    return carried;
  }
  std::shared_ptr<const tokenizer::Tokenizer> configured = config_tokenizer(recipe);
  if (carried && configured && carried->description() != configured->description())
    disagree("data.train.tokenizer", checkpoint::tokenizer_summary(configured->description()));
  return carried ? carried : configured;
}

template <typename T>
class ModelGenerator final : public TextGenerator {
 public:
  ModelGenerator(const Recipe& config, const io::SafetensorsFile& file,
                 std::shared_ptr<const tokenizer::Tokenizer> tokenizer, Index block)
      : model_({block}, config.layers, 1), tokenizer_(std::move(tokenizer)), block_(block), context_ids_(block, 0) {
    const Index vocabulary = tokenizer_->vocabulary();
    if (model_.outputs() != block * vocabulary)
      throw ConfigError("model.layers", "the model gives " + std::to_string(model_.outputs() / block) +
                                            " logits per position but the vocabulary has " +
                                            std::to_string(vocabulary) + " tokens");
    if (model_.token_vocabulary() < vocabulary)
      throw ConfigError(config.layers.front().key + ".vocab", "the embedding takes " +
                                                                  std::to_string(model_.token_vocabulary()) +
                                                                  " tokens but the vocabulary has " +
                                                                  std::to_string(vocabulary));
    const int code = file.metadata().count(checkpoint::kCheckpointMetadataKey) ? kExitCheckpoint : kExitData;
    checkpoint::load_named_tensors(file, model_.tensors(), model_.parameters(), code);
    checkpoint::load_buffer_tensors(file, model_, code);
  }

  Index context() const override { return block_; }

  std::string continue_text(const std::string& prompt, const SamplingOptions& options) override {
    std::vector<int32_t> tokens = encode(prompt);
    const size_t prompt_tokens = tokens.size();
    Rng rng(options.seed);
    const Index vocabulary = tokenizer_->vocabulary();
    std::vector<double> weights(static_cast<size_t>(vocabulary));
    for (int64_t n = 0; n < options.tokens; ++n) {
      // The last block tokens, from position 0; the positions after them hold token 0 and,
      // attention being causal, change nothing before them.
      const Index used = std::min<Index>(block_, static_cast<Index>(tokens.size()));
      std::fill(context_ids_.begin(), context_ids_.end(), 0);
      std::copy(tokens.end() - used, tokens.end(), context_ids_.begin());
      const ConstMatrixView<T> logits =
          model_.forward(nn::evaluation_context(), nn::BatchInput<T>::of_token_ids(context_ids_.data(), block_, 1));
      const T* last = logits.data() + (used - 1) * vocabulary;
      const int32_t next = sample(last, weights, options, rng);
      tokens.push_back(next);
    }
    return continuation(tokens, prompt_tokens);
  }

 private:
  std::vector<int32_t> encode(const std::string& prompt) const {
    if (prompt.empty()) return tokenizer_->start_of_text();
    if (const std::optional<tokenizer::Unencodable> fault = tokenizer_->first_unencodable(prompt))
      throw ConfigError("--prompt", "byte " + std::to_string(fault->offset) + " of the prompt " + fault->why);
    std::vector<int32_t> ids = tokenizer_->encode(prompt);
    // A model may encode some text to nothing (a foreign one may normalise spaces away): the
    // model needs at least one position to continue from.
    if (ids.empty()) return tokenizer_->start_of_text();
    if (static_cast<Index>(ids.size()) > block_)
      throw ConfigError("--prompt", "the prompt has " + std::to_string(ids.size()) +
                                        " tokens but the model reads at most " + std::to_string(block_) +
                                        " (its positions)");
    return ids;
  }

  // The text of the tokens after the prompt's. With a model trained elsewhere a subword's text
  // may depend on what precedes it (with a dummy prefix, SentencePiece drops the space of the
  // text's first piece), so the whole is decoded and the prompt's own text cut off.
  std::string continuation(const std::vector<int32_t>& tokens, size_t prompt_tokens) const {
    const std::string whole = tokenizer_->decode(tokens);
    const std::string before = tokenizer_->decode(std::span<const int32_t>(tokens.data(), prompt_tokens));
    if (whole.compare(0, before.size(), before) == 0) return whole.substr(before.size());
    return tokenizer_->decode(std::span<const int32_t>(tokens.data() + prompt_tokens, tokens.size() - prompt_tokens));
  }

  // softmax(logits / temperature) over the top_k largest logits (ties at the k-th kept, as
  // torch.topk's threshold keeps them), then one uniform draw through the cumulative sum.
  static int32_t sample(const T* logits, std::vector<double>& weights, const SamplingOptions& options, Rng& rng) {
    const Index v = static_cast<Index>(weights.size());
    for (Index i = 0; i < v; ++i) weights[static_cast<size_t>(i)] = static_cast<double>(logits[i]) / options.temperature;
    if (options.top_k > 0 && options.top_k < v) {
      std::vector<double> sorted(weights);
      std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<>());
      const double threshold = sorted[static_cast<size_t>(options.top_k - 1)];
      for (double& w : weights)
        if (w < threshold) w = -std::numeric_limits<double>::infinity();
    }
    const double largest = *std::max_element(weights.begin(), weights.end());
    double sum = 0.0;
    for (double& w : weights) sum += (w = std::exp(w - largest));
    double u = rng.uniform() * sum;
    for (Index i = 0; i < v; ++i) {
      u -= weights[static_cast<size_t>(i)];
      if (u < 0.0) return static_cast<int32_t>(i);
    }
    // Rounding left u at or above 0: the last token of positive weight.
    for (Index i = v; i-- > 0;)
      if (weights[static_cast<size_t>(i)] > 0.0) return static_cast<int32_t>(i);
    return 0;
  }

  nn::Model<T> model_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  Index block_;
  std::vector<int32_t> context_ids_;  // (block): the model's one sample
};

}  // namespace

std::unique_ptr<TextGenerator> load_text_generator(const std::string& path, const io::Json* user_config) {
  const io::SafetensorsFile file = io::read_safetensors(path, kExitData);
  io::Json carried;
  if (!user_config) {
    carried = checkpoint::carried_config(file, kExitData);
    if (carried.is_null())
      throw ConfigError("--config", "'" + path + "' carries no config (it was not written by mpiddp train or "
                                                 "export): give the one it was trained with");
  }
  const io::Json& json = user_config ? *user_config : carried;
  const Recipe config = read_recipe(json);
  if (nn::model_input_kind(config.layers) != InputKind::kTokenIds)
    throw ConfigError("model.layers[0]", "not a language model: its first layer is " + config.layers.front().type +
                                             ", which takes values; generation needs an embedding of token ids");
  if (has_full_attention(config.layer_list))
    throw ConfigError("model.layers", "not a language model: an attention layer has \"causal\": false, so its "
                                      "outputs read later tokens, which generation does not have yet");
  const Index block = context_length(config);
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer = tokenizer_of(file, config, user_config != nullptr);
  if (!tokenizer)
    throw ConfigError("data.train.source", "'" + path + "' carries no tokenizer and data.train names none (a \"text\" "
                                           "source, or a \"tokens\" source with a \"tokenizer\"): there is no way "
                                           "to turn tokens into text");
  if (config.dtype == "float64") return std::make_unique<ModelGenerator<double>>(config, file, std::move(tokenizer), block);
  return std::make_unique<ModelGenerator<float>>(config, file, std::move(tokenizer), block);
}

}  // namespace mpiddp::inference
