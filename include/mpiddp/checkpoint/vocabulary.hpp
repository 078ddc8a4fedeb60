#pragma once
// What travels with a language model's weights besides its tensors, so that `mpiddp
// generate` decodes what training encoded: the training data's tokenizer, in the metadata of
// weights files and checkpoints, and in weights files the config that built the model.
//   mpiddp_vocabulary  the tokenizer's description (tokenizer/tokenizer.hpp):
//                      {"encoding": "chars", "bytes": [10, 32, 33, ...]}: token id i is byte bytes[i];
//                      {"encoding": "sentencepiece", "vocabulary": V, "crc32c": C, "model": BASE64}
//   mpiddp_config      the resolved config (a checkpoint holds its own in mpiddp_checkpoint)
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/io/safetensors.hpp"
#include "mpiddp/tokenizer/tokenizer.hpp"

namespace mpiddp::checkpoint {

inline constexpr const char* kVocabularyKey = "mpiddp_vocabulary";
inline constexpr const char* kConfigKey = "mpiddp_config";
// A checkpoint's own metadata (checkpoint/checkpoint.hpp), whose "config" is its run's.
inline constexpr const char* kCheckpointMetadataKey = "mpiddp_checkpoint";

// The metadata value for a tokenizer ("" for none: no key is written).
std::string vocabulary_metadata(const tokenizer::Tokenizer* tokenizer);

// The tokenizer a file carries; null when it carries none. An Error(error_code) names the
// file when the value is not a tokenizer's description.
std::shared_ptr<const tokenizer::Tokenizer> read_tokenizer(const io::SafetensorsFile& file, int error_code);

// A tokenizer's description in a few words, for messages: "sentencepiece of 2048 tokens
// (crc32c 3735928559)", "chars of 63 tokens", "no tokenizer" (for "").
std::string tokenizer_summary(const std::string& description);

// The config a weights file or checkpoint carries (null when it carries none); an
// Error(error_code) names the file when it is not JSON.
io::Json carried_config(const io::SafetensorsFile& file, int error_code);

// The metadata of a language model's weights: its vocabulary (when not "") and its config.
std::map<std::string, std::string> model_metadata(const std::string& vocabulary, const std::string& config);

}  // namespace mpiddp::checkpoint
