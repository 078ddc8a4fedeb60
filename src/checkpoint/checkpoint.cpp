#include "mpiddp/checkpoint/checkpoint.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <system_error>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/checkpoint/vocabulary.hpp"
#include "mpiddp/checkpoint/weights.hpp"
#include "mpiddp/nn/residual.hpp"

namespace mpiddp::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMetadataKey = kCheckpointMetadataKey;
constexpr int kFormatVersion = 1;
constexpr const char* kOptimizerPrefix = "optimizer.";

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw Error(kExitCheckpoint, "checkpoint '" + path + "' refused: " + why);
}

// "step-000000000016.safetensors" -> 16; -1 for any other name (temporary files included).
int64_t step_of_file_name(const std::string& name) {
  const std::string head = "step-", tail = ".safetensors";
  if (name.size() <= head.size() + tail.size() || name.compare(0, head.size(), head) != 0 ||
      name.compare(name.size() - tail.size(), tail.size(), tail) != 0)
    return -1;
  const std::string digits = name.substr(head.size(), name.size() - head.size() - tail.size());
  if (digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(digits);
}

// "/optimizer/lr" -> "optimizer.lr"
std::string dotted(const std::string& pointer) {
  std::string key = pointer.substr(pointer.empty() ? 0 : 1);
  std::replace(key.begin(), key.end(), '/', '.');
  return key;
}

// The keys whose values differ, as "key: A in the checkpoint, B now" (the first three).
std::string config_differences(const io::Json& saved, const io::Json& now) {
  const io::Json a = saved.flatten(), b = now.flatten();
  std::vector<std::string> lines;
  auto value_of = [](const io::Json& flat, const std::string& key) {
    return flat.contains(key) ? flat[key].dump() : std::string("(absent)");
  };
  io::Json keys = io::Json::object();
  for (auto it = a.begin(); it != a.end(); ++it) keys[it.key()] = true;
  for (auto it = b.begin(); it != b.end(); ++it) keys[it.key()] = true;
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const std::string va = value_of(a, it.key()), vb = value_of(b, it.key());
    if (va != vb) lines.push_back(dotted(it.key()) + ": " + va + " in the checkpoint, " + vb + " now");
  }
  std::string text;
  for (size_t i = 0; i < lines.size() && i < 3; ++i) text += (i ? "; " : "") + lines[i];
  if (lines.size() > 3) text += "; and " + std::to_string(lines.size() - 3) + " more";
  return text;
}

// A text field of the metadata; refuses the checkpoint when it is absent or not text (found
// by fuzz_checkpoint: nlohmann's value() threw its type_error for a number).
std::string checkpoint_text(const io::Json& state, const char* key, const std::string& path) {
  const auto it = state.find(key);
  if (it == state.end() || !it->is_string())
    refuse(path, std::string("corrupt: its mpiddp_checkpoint metadata has no text field '") + key +
                     "'");
  return it->get<std::string>();
}

// An integer field of the metadata: a JSON integer that fits int64_t. nlohmann's get<int64_t>
// of a number written with a fraction or beyond 2^64 (parsed as a double) would cast a double
// that may not fit, which is undefined behaviour (fuzz_checkpoint found "epoch" 1.9e19).
int64_t checkpoint_integer(const io::Json& state, const char* key, const std::string& path) {
  const auto it = state.find(key);
  const bool fits = it != state.end() && it->is_number_integer() &&
                    (!it->is_number_unsigned() ||
                     it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  if (!fits)
    refuse(path, std::string("corrupt: its mpiddp_checkpoint metadata has no integer field '") + key +
                     "' (a whole number below 2^63)");
  return it->get<int64_t>();
}

bool cosine_spans_run(const config::Config& config) {
  return config.schedule.type == "cosine" && config.schedule.t_max == 0;
}

}  // namespace

io::Json resume_config(const config::Config& config) {
  io::Json kept = config.resolved;
  // Note [what may change on resume]: these keys do not change the sequence of parameter
  // updates, so a resumed run may set them anew: how long to train (epochs), where to log
  // and checkpoint, where to save the final weights, how the run started (init: the
  // parameters now come from the checkpoint) and how often replicas are compared. Anything
  // else (model, data, sampler, batch, optimizer, schedule, seed, dtype, sync) must match.
  // A cosine schedule with t_max 0 spans the whole run, so there epochs shapes every lr.
  // Fault policies, the watchdog, fault injection, threads, prefetch and the reduction path change
  // how a run is watched or spread over cores, not its updates (beyond float rounding, as
  // another world size does), so they may change too. When and how much it evaluates, and
  // when it stops early, change which updates run, not what any of them is. A residual's
  // recompute changes what a step keeps in memory, not one bit of it (nn/residual.hpp).
  for (const char* key : {"log", "checkpoint", "save_weights", "init", "check_every_steps",
                          "on_nonfinite", "max_skipped", "divergence", "watchdog", "debug",
                          "threads", "prefetch", "reduce", "eval", "early_stopping"})
    kept.erase(key);
  if (!cosine_spans_run(config)) kept.erase("epochs");
  // compute.isa changes which kernel variant computes, never a bit (Note [kernels per
  // instruction set] in src/kernels/isa.cpp): a run may resume on another CPU or another cap.
  if (kept.contains("compute")) {
    kept["compute"].erase("isa");
    if (kept["compute"].empty()) kept.erase("compute");
  }
  if (kept.contains("model") && kept["model"].contains("layers"))
    kept["model"]["layers"] = nn::without_recompute(std::move(kept["model"]["layers"]));
  return kept;
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "step-%012lld.safetensors", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

std::string best_checkpoint_path(const std::string& dir) { return (fs::path(dir) / "best").string(); }

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const int64_t step = step_of_file_name(entry.path().filename().string());
    if (step >= 0 && entry.is_regular_file()) found.emplace_back(step, entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

std::vector<std::string> remove_stale_temporaries(const std::string& dir) {
  std::vector<std::string> removed;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    // ".NAME.tmp" of a checkpoint NAME, and nothing else: other files there are the user's.
    const bool ours = name.size() > 5 && name[0] == '.' && name.ends_with(".tmp") &&
                      (step_of_file_name(name.substr(1, name.size() - 5)) >= 0 || name == ".best.tmp");
    if (ours && entry.is_regular_file() && fs::remove(entry.path(), error)) removed.push_back(name);
  }
  std::sort(removed.begin(), removed.end());
  return removed;
}

std::string resolve_resume_path(const std::string& spec, const std::string& checkpoint_dir) {
  std::string dir;
  if (spec == "auto") {
    // What a launcher's restart passes: the attempt before may have died before its first
    // checkpoint, or the run may keep none; then the run starts from the beginning.
    const auto all = checkpoint_dir.empty() ? std::vector<std::string>{} : list_checkpoints(checkpoint_dir);
    return all.empty() ? std::string() : all.back();
  }
  if (spec == "best") {
    if (checkpoint_dir.empty())
      throw Error(kExitConfig, "--resume best needs checkpoint.dir in the config (or give "
                               "the checkpoint's path)");
    const std::string best = best_checkpoint_path(checkpoint_dir);
    if (!fs::is_regular_file(best))
      throw Error(kExitCheckpoint, "--resume best: no best checkpoint '" + best +
                                       "' (checkpoint.keep_best writes it at the first evaluation)");
    return best;
  }
  if (spec == "latest") {
    if (checkpoint_dir.empty())
      throw Error(kExitConfig, "--resume latest needs checkpoint.dir in the config (or give "
                               "the checkpoint's path)");
    dir = checkpoint_dir;
  } else if (fs::is_directory(spec)) {
    dir = spec;
  } else {
    return spec;
  }
  const auto all = list_checkpoints(dir);
  if (all.empty())
    throw Error(kExitCheckpoint, "--resume " + spec + ": no checkpoint (step-*.safetensors) in '" +
                                     dir + "'");
  return all.back();
}

namespace {

// The checkpoint of `position` as the file `path` in settings.dir, written atomically.
template <typename T>
void write_training_state(const std::string& path, const config::CheckpointConfig& settings,
                          const TrainingPosition& position, const RunIdentity& identity,
                          const nn::Model<T>& model, optim::Optimizer<T>& optimizer,
                          const std::function<void()>& before_rename) {
  std::error_code error;
  fs::create_directories(settings.dir, error);
  if (error)
    throw Error(kExitOutput, "checkpoint.dir '" + settings.dir + "' cannot be created: " +
                                 error.message());
  auto tensors = named_tensors(model.tensors(), model.parameters());
  const auto tied = named_tensors(model.tied_tensors(), model.parameters());  // a state_dict's second names
  tensors.insert(tensors.end(), tied.begin(), tied.end());
  const auto model_buffers = buffer_tensors(model);  // BatchNorm's running statistics
  tensors.insert(tensors.end(), model_buffers.begin(), model_buffers.end());
  io::Json buffers = io::Json::array();
  for (const auto& buffer : optimizer.state_buffers()) {
    auto more = named_tensors(model.tensors(), buffer.values->data(),
                              kOptimizerPrefix + buffer.name + ".");
    tensors.insert(tensors.end(), more.begin(), more.end());
    buffers.push_back(buffer.name);
  }
  // The checksum covers the data section: the tensors' bytes, in order, without gaps.
  uint64_t checksum = fnv1a(nullptr, 0);
  for (const auto& t : tensors) checksum = fnv1a(t.data, io::tensor_bytes(t), checksum);
  const io::Json state = {
      {"format", kFormatVersion},
      {"epoch", position.epoch},
      {"batch", position.batch},
      {"step", position.step},
      {"optimizer_steps", optimizer.steps()},
      {"optimizer_buffers", buffers},
      {"model", identity.model},
      {"dtype", identity.dtype},
      {"global_batch", identity.global_batch},
      {"train_samples", identity.train_samples},
      {"steps_per_epoch", identity.steps_per_epoch},
      {"world_size", identity.world_size},
      // Every random stream of a run is a pure function of the seed and the epoch (sampler
      // shuffle, initialisation, synthetic data), so the position above is the whole RNG
      // state; the seed is in the config.
      {"rng", {{"kind", "derived from config seed and epoch"}}},
      {"config_hash", hex64(fnv1a(identity.config.dump()))},
      {"config", identity.config},
      {"data_checksum", hex64(checksum)}};
  io::Json with_evaluations = state;
  if (!position.evaluations.is_null()) with_evaluations["evaluations"] = position.evaluations;
  std::map<std::string, std::string> metadata = {{kMetadataKey, with_evaluations.dump()}};
  if (!identity.vocabulary.empty()) metadata[kVocabularyKey] = identity.vocabulary;
  io::write_safetensors(path, tensors, metadata, before_rename);
}

}  // namespace

template <typename T>
std::string write_checkpoint(const config::CheckpointConfig& settings, const TrainingPosition& position,
                             const RunIdentity& identity, const nn::Model<T>& model,
                             optim::Optimizer<T>& optimizer, const WriteProbes& probes) {
  const std::string path = checkpoint_path(settings.dir, position.step);
  write_training_state(path, settings, position, identity, model, optimizer, probes.before_rename);
  if (probes.before_pruning) probes.before_pruning();
  std::error_code error;
  if (settings.keep > 0) {
    const auto all = list_checkpoints(settings.dir);
    for (size_t i = 0; i + static_cast<size_t>(settings.keep) < all.size(); ++i)
      fs::remove(all[i], error);  // a checkpoint that cannot be removed is only wasted space
  }
  return path;
}

template <typename T>
std::string write_best_checkpoint(const config::CheckpointConfig& settings, const TrainingPosition& position,
                                  const RunIdentity& identity, const nn::Model<T>& model,
                                  optim::Optimizer<T>& optimizer, const WriteProbes& probes) {
  const std::string path = best_checkpoint_path(settings.dir);
  write_training_state(path, settings, position, identity, model, optimizer, probes.before_rename);
  return path;
}

template <typename T>
TrainingPosition restore_checkpoint(const io::SafetensorsFile& file, const RunIdentity& identity,
                                    nn::Model<T>& model, optim::Optimizer<T>& optimizer) {
  const std::string& path = file.name();
  const auto meta = file.metadata().find(kMetadataKey);
  if (meta == file.metadata().end())
    refuse(path, "it has no mpiddp_checkpoint metadata: a plain weights file is loaded with "
                 "init.weights, not --resume");
  const io::Json state = io::Json::parse(meta->second, nullptr, /*allow_exceptions=*/false);
  if (state.is_discarded() || !state.is_object() || !state.contains("format"))
    refuse(path, "corrupt: its mpiddp_checkpoint metadata is not valid JSON");
  if (state["format"] != kFormatVersion)
    refuse(path, "format version " + state["format"].dump() + " is not " +
                     std::to_string(kFormatVersion) + " (written by another mpiddp version)");
  try {
    if (hex64(fnv1a(file.data(), file.data_bytes())) != state.at("data_checksum").get<std::string>())
      refuse(path, "corrupt: the data checksum does not match (the file was damaged after it "
                   "was written)");
    if (state.at("model") != identity.model)
      refuse(path, "another model shape: the checkpoint holds " + state.at("model").get<std::string>() +
                       " but the config builds " + identity.model);
    if (state.at("dtype") != identity.dtype)
      refuse(path, "another dtype: the checkpoint is " + state.at("dtype").get<std::string>() +
                       " but the config says " + identity.dtype);
    if (state.at("config") != identity.config) {
      std::string why = "another config: " + config_differences(state.at("config"), identity.config);
      if (state.at("config").value("epochs", io::Json()) != identity.config.value("epochs", io::Json()))
        why += " (schedule cosine with t_max 0 spans the whole run, so epochs cannot change on "
               "resume; set schedule.t_max to resume with other epochs)";
      refuse(path, why);
    }
    if (state.at("train_samples") != identity.train_samples)
      refuse(path, "the training set has " + std::to_string(identity.train_samples) +
                       " samples but had " + state.at("train_samples").dump());
    if (state.at("global_batch") != identity.global_batch)
      refuse(path, "the global batch is " + std::to_string(identity.global_batch) +
                       " at this world size but was " + state.at("global_batch").dump() +
                       " (batch.per_rank times the world size must stay the same)");
    TrainingPosition position;
    position.epoch = checkpoint_integer(state, "epoch", path);
    position.batch = checkpoint_integer(state, "batch", path);
    position.step = checkpoint_integer(state, "step", path);
    if (state.contains("evaluations")) position.evaluations = state["evaluations"];
    if (position.batch > 0 && state.at("steps_per_epoch") != identity.steps_per_epoch)
      refuse(path, "it stopped mid-epoch (after batch " + std::to_string(position.batch) +
                       " of " + state.at("steps_per_epoch").dump() + ") but at this world size " +
                       "an epoch has " + std::to_string(identity.steps_per_epoch) +
                       " batches; resume it at its own world size (" +
                       state.at("world_size").dump() + ")");
    if (position.epoch < 1 || position.batch < 0 || position.step < 0 ||
        position.batch >= identity.steps_per_epoch)
      refuse(path, "corrupt: impossible position epoch " + std::to_string(position.epoch) +
                       ", batch " + std::to_string(position.batch));

    std::set<std::string> expected = state_tensor_names(model);
    load_named_tensors(file, model.tensors(), model.parameters(), kExitCheckpoint);
    load_buffer_tensors(file, model, kExitCheckpoint);
    for (const auto& buffer : optimizer.state_buffers()) {
      const std::string prefix = kOptimizerPrefix + buffer.name + ".";
      load_named_tensors(file, model.tensors(), buffer.values->data(), kExitCheckpoint, prefix);
      const auto names = tensor_names(model.tensors(), prefix);
      expected.insert(names.begin(), names.end());
    }
    reject_unexpected_tensors(file, expected, kExitCheckpoint);
    optimizer.set_steps(checkpoint_integer(state, "optimizer_steps", path));
    return position;
  } catch (const io::Json::exception& e) {
    refuse(path, std::string("corrupt: its mpiddp_checkpoint metadata lacks a field (") + e.what() + ")");
  }
}

size_t export_checkpoint_weights(const std::string& checkpoint, const std::string& weights) {
  const io::SafetensorsFile file = io::read_safetensors(checkpoint, kExitCheckpoint);
  const auto meta = file.metadata().find(kMetadataKey);
  if (meta == file.metadata().end())
    refuse(checkpoint, "it has no mpiddp_checkpoint metadata (not an mpiddp checkpoint)");
  const io::Json state = io::Json::parse(meta->second, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object())
    refuse(checkpoint, "corrupt: its mpiddp_checkpoint metadata is not a JSON object");
  if (hex64(fnv1a(file.data(), file.data_bytes())) != checkpoint_text(state, "data_checksum", checkpoint))
    refuse(checkpoint, "corrupt: the data checksum does not match");
  std::vector<io::TensorToWrite> parameters, average;
  const std::string average_prefix = kOptimizerPrefix + std::string("ema.");  // ema.decay's state
  for (const auto& t : file.tensors()) {
    if (t.name.rfind(kOptimizerPrefix, 0) != 0)
      parameters.push_back({t.name, t.dtype, t.shape, file.data() + t.begin});
    else if (t.name.rfind(average_prefix, 0) == 0)
      average.push_back({t.name.substr(average_prefix.size()), t.dtype, t.shape, file.data() + t.begin});
  }
  std::map<std::string, std::string> metadata = {{"producer", std::string("mpiddp ") + MPIDDP_VERSION},
                                                 {"model", checkpoint_text(state, "model", checkpoint)},
                                                 {"exported_from", checkpoint}};
  if (state.contains("config")) metadata[kConfigKey] = state["config"].dump();
  const auto vocabulary = file.metadata().find(kVocabularyKey);
  if (vocabulary != file.metadata().end()) metadata[kVocabularyKey] = vocabulary->second;
  io::write_safetensors(weights, parameters, metadata);
  // The average of the weights (ema.decay) beside them, under the parameters' names.
  if (!average.empty()) io::write_safetensors(average_weights_path(weights), average, metadata);
  return parameters.size();
}

bool checkpoint_due_mid_epoch(const config::CheckpointConfig& settings, int64_t step) {
  return !settings.dir.empty() && settings.every_steps > 0 && step % settings.every_steps == 0;
}

bool checkpoint_due_after_epoch(const config::CheckpointConfig& settings, int64_t epoch, int64_t step,
                                bool last_epoch) {
  if (settings.dir.empty()) return false;
  return last_epoch || (settings.every_epochs > 0 && epoch % settings.every_epochs == 0) ||
         checkpoint_due_mid_epoch(settings, step);
}

#define MPIDDP_INSTANTIATE(T)                                                                  \
  template std::string write_checkpoint<T>(const config::CheckpointConfig&, const TrainingPosition&,   \
                                           const RunIdentity&, const nn::Model<T>&,       \
                                           optim::Optimizer<T>&, const WriteProbes&);          \
  template std::string write_best_checkpoint<T>(const config::CheckpointConfig&, const TrainingPosition&, \
                                                const RunIdentity&, const nn::Model<T>&,  \
                                                optim::Optimizer<T>&, const WriteProbes&);     \
  template TrainingPosition restore_checkpoint<T>(const io::SafetensorsFile&,                  \
                                                  const RunIdentity&, nn::Model<T>&,      \
                                                  optim::Optimizer<T>&);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::checkpoint
