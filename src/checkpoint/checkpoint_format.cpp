// The checkpoint file: a safetensors file of the parameters, BatchNorm's buffers and the
// optimizer's state, with the run's identity and position in its metadata; written
// atomically, restored after the resume rules' checks (checkpoint_resume.cpp), and exported
// as a weights file.
#include "mpiddp/checkpoint/checkpoint.hpp"

#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "checkpoint_metadata.hpp"
#include "mpiddp/checkpoint/checkpoint_parts.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/checkpoint/vocabulary.hpp"
#include "mpiddp/checkpoint/weights.hpp"

namespace mpiddp::checkpoint {

namespace fs = std::filesystem;
using detail::checkpoint_integer;
using detail::checkpoint_text;
using detail::kFormatVersion;
using detail::kMetadataKey;
using detail::kOptimizerPrefix;
using detail::refuse;

namespace {

// The checkpoint of `position` as the file `path` in settings.dir, written atomically.
template <typename T>
void write_training_state(const std::string& path, const config::CheckpointConfig& settings,
                          const TrainingPosition& position, const RunIdentity& identity,
                          const nn::Model<T>& model, optim::UpdateRule<T>& optimizer,
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
  io::Json with_evaluations = detail::checkpoint_state(position, identity, optimizer.steps(), buffers);
  with_evaluations["data_checksum"] = hex64(checksum);
  if (!position.evaluations.is_null()) with_evaluations["evaluations"] = position.evaluations;
  std::map<std::string, std::string> metadata = {{kMetadataKey, with_evaluations.dump()}};
  if (!identity.vocabulary.empty()) metadata[kVocabularyKey] = identity.vocabulary;
  io::write_safetensors(path, tensors, metadata, before_rename);
}

}  // namespace

namespace detail {

io::Json checkpoint_state(const TrainingPosition& position, const RunIdentity& identity, int64_t optimizer_steps,
                          const io::Json& optimizer_buffers) {
  io::Json state = {
      {"format", kFormatVersion},
      {"epoch", position.epoch},
      {"batch", position.batch},
      {"step", position.step},
      {"optimizer_steps", optimizer_steps},
      {"optimizer_buffers", optimizer_buffers},
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
      {"config", identity.config}};
  return state;
}

void check_vocabulary(const std::string& carried, const RunIdentity& identity, const std::string& path) {
  // The config's data may name another tokenizer file under the same name: the ids would
  // mean other text, so the model would go on learning another language. A checkpoint
  // written before checkpoints carried the vocabulary (0.1) has none, and resumes as before.
  if (!carried.empty() && carried != identity.vocabulary)
    refuse(path, "another tokenizer: the checkpoint's ids are those of " + tokenizer_summary(carried) +
                     ", the config's data are encoded by " + tokenizer_summary(identity.vocabulary));
}

Exported exported_as(const std::string& tensor_name) {
  const std::string average_prefix = kOptimizerPrefix + std::string("ema.");  // ema.decay's state
  if (tensor_name.rfind(kOptimizerPrefix, 0) != 0) return {ExportedAs::kWeight, tensor_name};
  if (tensor_name.rfind(average_prefix, 0) == 0) return {ExportedAs::kAverage, tensor_name.substr(average_prefix.size())};
  return {ExportedAs::kNothing, ""};
}

std::map<std::string, std::string> exported_metadata(const io::Json& state, const std::string& vocabulary,
                                                     const std::string& checkpoint, const std::string& path) {
  std::map<std::string, std::string> metadata = {{"producer", std::string("mpiddp ") + MPIDDP_VERSION},
                                                 {"model", checkpoint_text(state, "model", path)},
                                                 {"exported_from", checkpoint}};
  if (state.contains("config")) metadata[kConfigKey] = state["config"].dump();
  if (!vocabulary.empty()) metadata[kVocabularyKey] = vocabulary;
  return metadata;
}

}  // namespace detail

void prune_checkpoints(const config::CheckpointConfig& settings) {
  if (settings.keep <= 0) return;
  const auto all = list_checkpoints(settings.dir);
  for (size_t i = 0; i + static_cast<size_t>(settings.keep) < all.size(); ++i) remove_checkpoint(all[i]);
}

template <typename T>
std::string write_checkpoint(const config::CheckpointConfig& settings, const TrainingPosition& position,
                             const RunIdentity& identity, const nn::Model<T>& model,
                             optim::UpdateRule<T>& optimizer, const WriteProbes& probes) {
  const std::string path = checkpoint_path(settings.dir, position.step);
  write_training_state(path, settings, position, identity, model, optimizer, probes.before_rename);
  if (probes.before_pruning) probes.before_pruning();
  prune_checkpoints(settings);
  return path;
}

template <typename T>
std::string write_best_checkpoint(const config::CheckpointConfig& settings, const TrainingPosition& position,
                                  const RunIdentity& identity, const nn::Model<T>& model,
                                  optim::UpdateRule<T>& optimizer, const WriteProbes& probes) {
  const std::string path = best_checkpoint_path(settings.dir);
  write_training_state(path, settings, position, identity, model, optimizer, probes.before_rename);
  remove_checkpoint(best_parts_path(settings.dir));  // a best in parts of checkpoint.format's other value
  return path;
}

template <typename T>
TrainingPosition restore_checkpoint(const io::SafetensorsFile& file, const RunIdentity& identity,
                                    nn::Model<T>& model, optim::UpdateRule<T>& optimizer, Index state_begin) {
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
    if (hex64(file.data_checksum()) != state.at("data_checksum").get<std::string>())
      refuse(path, "corrupt: the data checksum does not match (the file was damaged after it "
                   "was written)");
    const TrainingPosition position = detail::resume_position(state, identity, path);
    const auto carried = file.metadata().find(kVocabularyKey);
    detail::check_vocabulary(carried == file.metadata().end() ? "" : carried->second, identity, path);

    std::set<std::string> expected = state_tensor_names(model);
    load_parameters(file, model, kExitCheckpoint);
    load_buffer_tensors(file, model, kExitCheckpoint);
    // A rank whose part is empty (reduce.shard "parameters" on a model smaller than the ranks'
    // cache lines) holds a rule without buffers: the file's optimizer tensors are then the
    // writer's buffers, equal to this run's (resume_position checked the configs alike).
    if (model.parameter_part_begin() == model.parameter_part_end())
      for (const auto& name : state.at("optimizer_buffers")) {
        const auto names = tensor_names(model.tensors(), kOptimizerPrefix + name.get<std::string>() + ".");
        expected.insert(names.begin(), names.end());
      }
    for (const auto& buffer : optimizer.state_buffers()) {
      const std::string prefix = kOptimizerPrefix + buffer.name + ".";
      const auto held = static_cast<Index>(buffer.values->size());
      load_named_tensors(file, model.tensors(), buffer.values->data(), kExitCheckpoint, prefix, state_begin,
                         state_begin + held);
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
  if (is_parts_checkpoint(checkpoint)) return export_parts_weights(checkpoint, weights);
  const io::SafetensorsFile file = io::read_safetensors(checkpoint, kExitCheckpoint);
  const auto meta = file.metadata().find(kMetadataKey);
  if (meta == file.metadata().end())
    refuse(checkpoint, "it has no mpiddp_checkpoint metadata (not an mpiddp checkpoint)");
  const io::Json state = io::Json::parse(meta->second, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object())
    refuse(checkpoint, "corrupt: its mpiddp_checkpoint metadata is not a JSON object");
  if (hex64(file.data_checksum()) != checkpoint_text(state, "data_checksum", checkpoint))
    refuse(checkpoint, "corrupt: the data checksum does not match");
  std::vector<io::TensorToWrite> parameters, average;
  for (const auto& t : file.tensors()) {
    const detail::Exported exported = detail::exported_as(t.name);
    if (exported.as == detail::ExportedAs::kNothing) continue;
    (exported.as == detail::ExportedAs::kWeight ? parameters : average)
        .push_back({exported.name, t.dtype, t.shape, file.data() + t.begin});
  }
  const auto vocabulary = file.metadata().find(kVocabularyKey);
  const auto metadata = detail::exported_metadata(
      state, vocabulary == file.metadata().end() ? "" : vocabulary->second, checkpoint, checkpoint);
  io::write_safetensors(weights, parameters, metadata);
  // The average of the weights (ema.decay) beside them, under the parameters' names.
  if (!average.empty()) io::write_safetensors(average_weights_path(weights), average, metadata);
  return parameters.size();
}

#define MPIDDP_INSTANTIATE(T)                                                                  \
  template std::string write_checkpoint<T>(const config::CheckpointConfig&, const TrainingPosition&,   \
                                           const RunIdentity&, const nn::Model<T>&,       \
                                           optim::UpdateRule<T>&, const WriteProbes&);          \
  template std::string write_best_checkpoint<T>(const config::CheckpointConfig&, const TrainingPosition&, \
                                                const RunIdentity&, const nn::Model<T>&,  \
                                                optim::UpdateRule<T>&, const WriteProbes&);     \
  template TrainingPosition restore_checkpoint<T>(const io::SafetensorsFile&,                  \
                                                  const RunIdentity&, nn::Model<T>&,      \
                                                  optim::UpdateRule<T>&, Index);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::checkpoint
