#include "mpiddp/config/config.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/config/data_source.hpp"
#include "mpiddp/config/interchange.hpp"

namespace mpiddp::config {

namespace {

constexpr double kHuge = std::numeric_limits<double>::max();

// Whether two data sources name the same SentencePiece model file (or both none): "kjv.model"
// and "./kjv.model" are one file.
bool same_tokenizer(const data::SourceConfig& a, const data::SourceConfig& b) {
  const std::string &first = data::named_tokenizer(a), &second = data::named_tokenizer(b);
  if (first.empty() || second.empty()) return first == second;
  std::error_code ignored;
  return std::filesystem::weakly_canonical(first, ignored) == std::filesystem::weakly_canonical(second, ignored);
}

// A tokenizer's path for a message.
std::string shown_tokenizer(const data::SourceConfig& source) {
  const std::string& path = data::named_tokenizer(source);
  return path.empty() ? "none" : "\"" + path + "\"";
}

nn::Shape parse_input_shape(io::JsonSection& model) {
  const io::Json* shape = model.raw("input_shape");
  if (!shape) return {};
  const std::string key = model.key_path("input_shape");
  bool valid = shape->is_array() && !shape->empty() && shape->size() <= 3;
  nn::Shape dims;
  for (size_t i = 0; valid && i < shape->size(); ++i) {
    const io::Json& d = (*shape)[i];
    valid = d.is_number_integer() && d.get<int64_t>() >= 1 && d.get<int64_t>() <= (1 << 24);
    if (valid) dims.push_back(d.get<int64_t>());
  }
  if (!valid || nn::shape_size(dims) > (Index{1} << 30))
    throw ConfigError(key, "expected a per-sample shape of 1 to 3 positive integers like "
                           "[1, 28, 28] (channels, height, width) or [784]");
  model.put("input_shape", *shape);
  return dims;
}

optim::OptimizerConfig parse_optimizer(io::JsonSection& s) {
  optim::OptimizerConfig o;
  o.type = s.choice("type", "sgd", {"sgd", "adam", "adamw"});
  o.lr = s.number("lr", 0.03, 0.0, kHuge);
  if (o.type == "sgd") {
    o.momentum = s.number("momentum", 0.0, 0.0, kHuge);
    o.dampening = s.number("dampening", 0.0, 0.0, 1.0);
    o.nesterov = s.boolean("nesterov", false);
    o.weight_decay = s.number("weight_decay", 0.0, 0.0, kHuge);
    if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0))
      throw ConfigError("optimizer.nesterov", "nesterov needs momentum > 0 and dampening 0");
  } else {
    o.weight_decay = s.number("weight_decay", o.type == "adamw" ? 0.01 : 0.0, 0.0, kHuge);
    o.eps = s.number("eps", 1e-8, 0.0, kHuge);
    const io::Json* betas = s.raw("betas");
    if (betas) {
      const bool valid = betas->is_array() && betas->size() == 2 && (*betas)[0].is_number() &&
                         (*betas)[1].is_number();
      if (!valid) throw ConfigError("optimizer.betas", "expected two numbers like [0.9, 0.999]");
      o.beta1 = (*betas)[0].get<double>();
      o.beta2 = (*betas)[1].get<double>();
      if (o.beta1 < 0 || o.beta1 >= 1 || o.beta2 < 0 || o.beta2 >= 1)
        throw ConfigError("optimizer.betas", "each beta must be in [0, 1)");
    }
    s.put("betas", io::Json::array({o.beta1, o.beta2}));
  }
  // Read only when given, so that a config without them resolves, and its checkpoints
  // resume, as before they existed.
  if (s.has("decay"))
    o.decay = s.choice("decay", "all", {"all", "matrices"}) == "matrices" ? optim::DecayRule::kMatrices
                                                                          : optim::DecayRule::kAll;
  if (s.has("clip_grad_norm")) o.clip_grad_norm = s.number("clip_grad_norm", 0.0, 0.0, kHuge);
  return o;
}

optim::ScheduleConfig parse_schedule(io::JsonSection& s) {
  optim::ScheduleConfig c;
  c.type = s.choice("type", "constant", {"constant", "step", "cosine"});
  c.unit = s.choice("unit", "epoch", {"epoch", "step"});
  if (c.type == "step") {
    c.step_size = s.integer("step_size", 1, 1, io::kMaxConfigCount);
    c.gamma = s.number("gamma", 0.1, 0.0, kHuge);
  }
  if (c.type == "cosine") {
    c.t_max = s.integer("t_max", 0, 0, io::kMaxConfigCount);
    c.eta_min = s.number("eta_min", 0.0, 0.0, kHuge);
  }
  c.warmup_steps = s.integer("warmup_steps", 0, 0, io::kMaxConfigCount);
  return c;
}

}  // namespace

Index Config::per_rank_batch(int world_size) const {
  if (batch_per_rank > 0) return batch_per_rank;
  if (batch_global % world_size != 0)
    throw ConfigError("batch.global", "global batch " + std::to_string(batch_global) +
                                          " is not divisible by the world size " +
                                          std::to_string(world_size) +
                                          "; choose a multiple of it, or set batch.per_rank");
  return batch_global / world_size;
}

Index Config::global_batch(int world_size) const { return per_rank_batch(world_size) * world_size; }

nn::Shape model_input_shape(const Config& config, const std::vector<Index>& data_shape,
                            Index data_features, const std::string& data_key) {
  const nn::Shape data = data_shape.empty() ? nn::Shape{data_features} : data_shape;
  if (!config.model_input_shape.empty()) {
    const nn::Shape& wanted = config.model_input_shape;
    // A flat file (csv, npy [N, F]) may be read as images of the same size, and any file
    // flat; a file that has a shape of its own must have the one asked for, up to dimensions
    // of size 1 (npy [N, 28, 28] read as (1, 28, 28)).
    auto squeezed = [](const nn::Shape& shape) {
      nn::Shape kept;
      for (Index d : shape)
        if (d != 1) kept.push_back(d);
      return kept;
    };
    const bool fits = nn::shape_size(wanted) == data_features &&
                      (data_shape.empty() || wanted.size() == 1 || squeezed(data) == squeezed(wanted));
    if (!fits)
      throw ConfigError("model.input_shape", nn::shape_text(wanted) + " does not fit " + data_key +
                                                 ", whose samples are " + nn::shape_text(data) +
                                                 " (" + std::to_string(data_features) + " values)");
    return wanted;
  }
  // The data's features are checked against model.inputs with data.eval's (check_data_fits).
  if (config.model_inputs > 0) return {config.model_inputs};
  return data;
}

io::Json default_experiment() {
  return io::Json::parse(R"({
    "seed": 0,
    "dtype": "float32",
    "model": {"inputs": 6, "layers": [
      {"type": "linear", "out": 48}, {"type": "tanh"},
      {"type": "linear", "out": 48}, {"type": "tanh"},
      {"type": "linear", "out": 1}]},
    "loss": "mse",
    "data": {"train": {"source": "synthetic_regression", "samples": 256, "features": 6, "noise": 0.1}},
    "sampler": {"shuffle": true, "drop_last": false},
    "batch": {"global": 64},
    "optimizer": {"type": "sgd", "lr": 0.03},
    "epochs": 4
  })");
}

Config parse_config(const io::Json& user) {
  Config c;
  io::JsonSection root(&user, "");
  c.seed = static_cast<uint64_t>(root.integer("seed", 0, 0, std::numeric_limits<int64_t>::max()));
  c.dtype = root.choice("dtype", "float32", {"float32", "float64"});
  {
    auto model = root.section("model");
    if (!user.contains("model")) throw ConfigError("model", "required key is missing");
    c.model_inputs = model.integer("inputs", 0, 0, 1 << 24);
    c.model_input_shape = parse_input_shape(model);
    if (c.model_inputs > 0 && !c.model_input_shape.empty() &&
        nn::shape_size(c.model_input_shape) != c.model_inputs)
      throw ConfigError("model.input_shape", nn::shape_text(c.model_input_shape) + " has " +
                                                 std::to_string(nn::shape_size(c.model_input_shape)) +
                                                 " values per sample but model.inputs is " +
                                                 std::to_string(c.model_inputs) + "; set one of them");
    c.layers = nn::parse_layer_list(model, "layers");
    model.finish();
  }
  c.loss = nn::parse_loss(root);
  {
    auto data = root.section("data");
    if (!data.has("train")) throw ConfigError("data.train", "required key is missing");
    auto train = data.section("train");
    c.train_data = parse_data_source(train, nn::model_input_kind(c.layers));
    train.finish();
    if (data.has("eval")) {
      auto eval = data.section("eval");
      c.eval_data = parse_data_source(eval, nn::model_input_kind(c.layers));
      // "chars" numbers a file's own sorted characters: another file would number them otherwise.
      const data::TextConfig &train_text = c.train_data.text, &eval_text = c.eval_data->text;
      if (c.train_data.source == "text" && c.eval_data->source == "text" &&
          (eval_text.encoding != train_text.encoding || (eval_text.encoding == "chars" && eval_text.path != train_text.path)))
        throw ConfigError("data.eval.path", "with encoding \"chars\" the ids are the file's own sorted characters; "
                                            "evaluate on another range of " + train_text.path +
                                            " with the same encoding, or use \"bytes\" for both");
      // A SentencePiece model numbers its own pieces: both sets must be encoded by the one model.
      if (!same_tokenizer(c.train_data, *c.eval_data))
        throw ConfigError("data.eval.tokenizer", "the evaluation's ids must come from data.train's tokenizer (" +
                                                     shown_tokenizer(c.train_data) + "), not from " +
                                                     shown_tokenizer(*c.eval_data));
      eval.finish();
    } else {
      data.accept("eval");
    }
    data.finish();
  }
  {
    auto sampler = root.section("sampler");
    c.shuffle = sampler.boolean("shuffle", true);
    c.drop_last = sampler.boolean("drop_last", false);
    c.sampler_order = sampler.text("order", "");
    sampler.finish();
  }
  {
    auto batch = root.section("batch");
    const bool global = batch.has("global"), per_rank = batch.has("per_rank");
    if (global == per_rank)
      throw ConfigError("batch", "set exactly one of batch.global and batch.per_rank");
    if (global) c.batch_global = batch.integer("global", 0, 1, io::kMaxConfigCount);
    if (per_rank) c.batch_per_rank = batch.integer("per_rank", 0, 1, io::kMaxConfigCount);
    batch.finish();
  }
  {
    auto optimizer = root.section("optimizer");
    c.optimizer = parse_optimizer(optimizer);
    optimizer.finish();
  }
  // ema.*: read only when given, so that a config without it resolves as before it existed.
  if (root.has("ema")) {
    auto ema = root.section("ema");
    c.optimizer.ema_decay = ema.number("decay", 0.0, 0.0, 1.0);
    if (c.optimizer.ema_decay == 1.0)
      throw ConfigError("ema.decay", "must be below 1: an average with decay 1 never moves from the "
                                     "initial parameters (0.999 or 0.9999 are usual; 0 turns it off)");
    c.optimizer.ema_every_steps = ema.integer("every_steps", 1, 1, io::kMaxConfigCount);
    ema.finish();
  }
  {
    auto schedule = root.section("schedule");
    c.schedule = parse_schedule(schedule);
    schedule.finish();
  }
  c.epochs = root.integer("epochs", 4, 1, io::kMaxConfigCount);
  c.sync = root.boolean("sync", true);
  c.check_every_steps = root.integer("check_every_steps", 0, 0, io::kMaxConfigCount);
  c.faults = parse_fault_config(root);
  if (root.has("batchnorm")) {
    auto batchnorm = root.section("batchnorm");
    c.batchnorm_sync = batchnorm.boolean("sync", true);
    batchnorm.finish();
  }
  {
    auto log = root.section("log");
    c.log_path = log.text("path", "");
    c.log_every_steps = log.integer("every_steps", 1, 1, io::kMaxConfigCount);
    // Read only when given, so that a config without them resolves as before they existed.
    if (log.has("csv")) c.log_csv = log.text("csv", "");
    if (log.has("tensorboard")) c.log_tensorboard = log.text("tensorboard", "");
    log.finish();
  }
  parse_evaluation_keys(root, c.eval, c.early_stopping);
  c.trace = parse_trace_config(root);
  parse_interchange_keys(root, c);
  parse_performance(root, c);
  parse_deterministic(root, c);
  root.finish();
  c.resolved = root.resolved();
  return c;
}

void apply_override(io::Json& user, const std::string& assignment) {
  const auto equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0)
    throw ConfigError("--set", "expected KEY=VALUE like optimizer.lr=0.1, got '" + assignment + "'");
  const std::string key = assignment.substr(0, equals);
  const std::string text = assignment.substr(equals + 1);
  io::Json value = io::Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = text;  // a bare word: a string value
  // The resolved config goes into the JSON log, which must be UTF-8. A parsed value is; a
  // bare word is checked here, where the error can name the key (found by fuzz_config).
  try {
    (void)value.dump();
  } catch (const nlohmann::json::type_error&) {
    throw ConfigError(key, "the value is not valid UTF-8");
  }

  io::Json* node = &user;
  const auto parts = io::split_key_path(key);
  for (size_t i = 0; i < parts.size(); ++i) {
    const bool last = i + 1 == parts.size();
    if (node->is_array()) {
      size_t index = 0;
      try {
        index = std::stoul(parts[i]);
      } catch (const std::exception&) {
        throw ConfigError(key, "'" + parts[i] + "' is not a list index");
      }
      if (index >= node->size())
        throw ConfigError(key, "index " + parts[i] + " is past the end of a list of " +
                                   std::to_string(node->size()));
      node = &(*node)[index];
    } else {
      if (!node->is_object()) *node = io::Json::object();
      node = &(*node)[parts[i]];
    }
    if (last) *node = value;
  }
}

io::Json parse_config_text(const std::string& text, const std::string& origin) {
  try {
    return io::Json::parse(text, nullptr, true, /*ignore_comments=*/true);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(origin, std::string("not valid JSON: ") + e.what());
  }
}

io::Json read_config_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError(path, "cannot open the config file");
  // A config is a few kilobytes; a bound keeps a wrong path (a dataset, /dev/zero) from
  // being read into memory whole.
  constexpr size_t kMaxBytes = 16 << 20;
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxBytes)
      throw ConfigError(path, "larger than 16 MiB: is this really a config file?");
  }
  if (in.bad()) throw ConfigError(path, "cannot read the config file");
  return parse_config_text(text, path);
}

uint64_t config_hash(const Config& config) {
  io::Json hashed = config.resolved;
  if (hashed.contains("log")) hashed["log"].erase("path");
  return fnv1a(hashed.dump());
}

}  // namespace mpiddp::config
