#pragma once
// What travels with a language model's weights besides its tensors, so that `mpiddp
// generate` decodes what training encoded: the text source's vocabulary, in the metadata of
// weights files and checkpoints, and in weights files the config that built the model.
//   mpiddp_vocabulary  {"encoding": "chars", "bytes": [10, 32, 33, ...]}: token id i is byte bytes[i]
//   mpiddp_config      the resolved config (a checkpoint holds its own in mpiddp_checkpoint)
#include <map>
#include <string>
#include <vector>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/io/safetensors.hpp"

namespace mpiddp::checkpoint {

inline constexpr const char* kVocabularyKey = "mpiddp_vocabulary";
inline constexpr const char* kConfigKey = "mpiddp_config";
// A checkpoint's own metadata (checkpoint/checkpoint.hpp), whose "config" is its run's.
inline constexpr const char* kCheckpointMetadataKey = "mpiddp_checkpoint";

// The metadata value for a text vocabulary ("" when there is none: no key is written).
std::string vocabulary_metadata(const std::vector<unsigned char>& bytes, const std::string& encoding);

// The vocabulary a file carries; empty when it carries none. An Error(error_code) names the
// file when the value is not such a vocabulary.
std::vector<unsigned char> read_vocabulary(const io::SafetensorsFile& file, int error_code);

// The config a weights file or checkpoint carries (null when it carries none); an
// Error(error_code) names the file when it is not JSON.
io::Json carried_config(const io::SafetensorsFile& file, int error_code);

// The metadata of a language model's weights: its vocabulary (when not "") and its config.
std::map<std::string, std::string> model_metadata(const std::string& vocabulary, const std::string& config);

}  // namespace mpiddp::checkpoint
