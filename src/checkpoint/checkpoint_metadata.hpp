#pragma once
// What the checkpoint files share (src/checkpoint/checkpoint_*.cpp): the metadata's key and
// version, the optimizer's tensor prefix, and how a checkpoint is refused.
#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/checkpoint/vocabulary.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::checkpoint::detail {

constexpr const char* kMetadataKey = kCheckpointMetadataKey;
constexpr int kFormatVersion = 1;
constexpr const char* kOptimizerPrefix = "optimizer.";

[[noreturn]] inline void refuse(const std::string& path, const std::string& why) {
  throw Error(kExitCheckpoint, "checkpoint '" + path + "' refused: " + why);
}

// A text field of the metadata; refuses the checkpoint when it is absent or not text (found
// by fuzz_checkpoint: nlohmann's value() threw its type_error for a number).
inline std::string checkpoint_text(const io::Json& state, const char* key, const std::string& path) {
  const auto it = state.find(key);
  if (it == state.end() || !it->is_string())
    refuse(path, std::string("corrupt: its mpiddp_checkpoint metadata has no text field '") + key +
                     "'");
  return it->get<std::string>();
}

// An integer field of the metadata: a JSON integer that fits int64_t. nlohmann's get<int64_t>
// of a number written with a fraction or beyond 2^64 (parsed as a double) would cast a double
// that may not fit, which is undefined behaviour (fuzz_checkpoint found "epoch" 1.9e19).
inline int64_t checkpoint_integer(const io::Json& state, const char* key, const std::string& path) {
  const auto it = state.find(key);
  const bool fits = it != state.end() && it->is_number_integer() &&
                    (!it->is_number_unsigned() ||
                     it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
  if (!fits)
    refuse(path, std::string("corrupt: its mpiddp_checkpoint metadata has no integer field '") + key +
                     "' (a whole number below 2^63)");
  return it->get<int64_t>();
}

// The position a checkpoint's metadata `state` resumes at, once the run's identity has been
// checked against it (the model, dtype, config, training set and global batch; a mid-epoch
// checkpoint at another world size): refused otherwise, naming what differs
// (checkpoint_resume.cpp).
TrainingPosition resume_position(const io::Json& state, const RunIdentity& identity, const std::string& path);

// The checkpoint's metadata, in either format (a file's "mpiddp_checkpoint", the index of one in
// parts): the position, the optimizer's step count and state buffers' names, the run's identity
// (not the evaluations, which follow the file's data checksum).
io::Json checkpoint_state(const TrainingPosition& position, const RunIdentity& identity, int64_t optimizer_steps,
                          const io::Json& optimizer_buffers);
// Refuses a checkpoint whose carried vocabulary (its tokenizer; "" for none) is not the run's.
void check_vocabulary(const std::string& carried, const RunIdentity& identity, const std::string& path);

// What mpiddp export makes of a checkpoint's tensor: a weight (a parameter or buffer, under its
// own name), ema's average of one (under the parameter's name, in W.ema.safetensors), or
// nothing (the optimizer's other state).
enum class ExportedAs { kWeight, kAverage, kNothing };
struct Exported {
  ExportedAs as;
  std::string name;  // the name it is written under
};
Exported exported_as(const std::string& tensor_name);
// The metadata of the weights mpiddp export writes from the checkpoint `checkpoint` (metadata
// `state`, refused naming `path` when it lacks the model; `vocabulary` "" for none).
std::map<std::string, std::string> exported_metadata(const io::Json& state, const std::string& vocabulary,
                                                     const std::string& checkpoint, const std::string& path);

}  // namespace mpiddp::checkpoint::detail
