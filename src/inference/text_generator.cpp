#include "mpiddp/inference/text_generator.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "mpiddp/checkpoint/vocabulary.hpp"
#include "mpiddp/checkpoint/weights.hpp"
#include "mpiddp/config/data_source.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/core/rng.hpp"
#include "mpiddp/data/text.hpp"
#include "mpiddp/io/safetensors.hpp"
#include "mpiddp/nn/model.hpp"

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

// The vocabulary the file carries, else that of the config's text file.
std::vector<unsigned char> text_vocabulary_of(const io::SafetensorsFile& file, const Recipe& recipe) {
  std::vector<unsigned char> bytes = checkpoint::read_vocabulary(file, kExitData);
  if (!bytes.empty() || recipe.train_data.source != "text") return bytes;
  return data::text_vocabulary(data::read_text_file(recipe.train_data.text.path), recipe.train_data.text.encoding);
}

template <typename T>
class ModelGenerator final : public TextGenerator {
 public:
  ModelGenerator(const Recipe& config, const io::SafetensorsFile& file, std::vector<unsigned char> bytes,
                 Index block)
      : model_({block}, config.layers, 1), bytes_(std::move(bytes)), block_(block), context_ids_(block, 0) {
    const Index vocabulary = static_cast<Index>(bytes_.size());
    if (model_.outputs() != block * vocabulary)
      throw ConfigError("model.layers", "the model gives " + std::to_string(model_.outputs() / block) +
                                            " logits per position but the vocabulary has " +
                                            std::to_string(vocabulary) + " tokens");
    if (model_.token_vocabulary() < vocabulary)
      throw ConfigError(config.layers.front().key + ".vocab", "the embedding takes " +
                                                                  std::to_string(model_.token_vocabulary()) +
                                                                  " tokens but the vocabulary has " +
                                                                  std::to_string(vocabulary));
    for (size_t i = 0; i < bytes_.size(); ++i) id_of_[bytes_[i]] = static_cast<int32_t>(i);
    const int code = file.metadata().count(checkpoint::kCheckpointMetadataKey) ? kExitCheckpoint : kExitData;
    checkpoint::load_named_tensors(file, model_.tensors(), model_.parameters(), code);
    checkpoint::load_buffer_tensors(file, model_, code);
  }

  Index context() const override { return block_; }

  std::string continue_text(const std::string& prompt, const SamplingOptions& options) override {
    std::vector<int32_t> tokens = encode(prompt);
    Rng rng(options.seed);
    std::string text;
    const Index vocabulary = static_cast<Index>(bytes_.size());
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
      text.push_back(static_cast<char>(bytes_[static_cast<size_t>(next)]));
    }
    return text;
  }

 private:
  std::vector<int32_t> encode(const std::string& prompt) const {
    if (prompt.empty()) return {0};
    if (static_cast<Index>(prompt.size()) > block_)
      throw ConfigError("--prompt", "the prompt has " + std::to_string(prompt.size()) +
                                        " tokens but the model reads at most " + std::to_string(block_) +
                                        " (its positions)");
    std::vector<int32_t> ids;
    for (size_t i = 0; i < prompt.size(); ++i) {
      const auto byte = static_cast<unsigned char>(prompt[i]);
      if (id_of_[byte] < 0) {
        const std::string shown = byte >= 32 && byte < 127 ? "'" + std::string(1, prompt[i]) + "' " : "";
        throw ConfigError("--prompt", "character " + shown + "(byte " + std::to_string(byte) + ") at position " +
                                          std::to_string(i) + " is not in the model's vocabulary of " +
                                          std::to_string(bytes_.size()) + " tokens");
      }
      ids.push_back(id_of_[byte]);
    }
    return ids;
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
  std::vector<unsigned char> bytes_;  // token id -> byte
  std::array<int32_t, 256> id_of_ = filled_minus_one();
  Index block_;
  std::vector<int32_t> context_ids_;  // (block): the model's one sample

  static std::array<int32_t, 256> filled_minus_one() {
    std::array<int32_t, 256> ids;
    ids.fill(-1);
    return ids;
  }
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
  std::vector<unsigned char> bytes = text_vocabulary_of(file, config);
  if (bytes.empty())
    throw ConfigError("data.train.source", "'" + path + "' carries no text vocabulary and data.train is not a "
                                           "\"text\" source: there is no way to turn tokens into text");
  if (config.dtype == "float64") return std::make_unique<ModelGenerator<double>>(config, file, std::move(bytes), block);
  return std::make_unique<ModelGenerator<float>>(config, file, std::move(bytes), block);
}

}  // namespace mpiddp::inference
