#include "mpiddp/checkpoint/vocabulary.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::checkpoint {

std::string vocabulary_metadata(const tokenizer::Tokenizer* tokenizer) {
  return tokenizer ? tokenizer->description() : "";
}

std::shared_ptr<const tokenizer::Tokenizer> read_tokenizer(const io::SafetensorsFile& file, int error_code) {
  const auto found = file.metadata().find(kVocabularyKey);
  if (found == file.metadata().end()) return nullptr;
  return tokenizer::tokenizer_from_description(found->second, "'" + file.name() + "': its " + kVocabularyKey + " metadata ",
                                               error_code);
}

std::string tokenizer_summary(const std::string& description) {
  if (description.empty()) return "no tokenizer";
  const io::Json value = io::Json::parse(description, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object()) return "an unreadable tokenizer";
  const auto given = value.find("encoding");
  const std::string encoding = given != value.end() && given->is_string() ? given->get<std::string>() : "chars";
  if (encoding == "sentencepiece")
    return "sentencepiece of " + value.value("vocabulary", io::Json()).dump() + " tokens (crc32c " +
           value.value("crc32c", io::Json()).dump() + ")";
  return encoding + " of " + std::to_string(value.contains("bytes") ? value["bytes"].size() : 0) + " tokens";
}

io::Json carried_config(const io::SafetensorsFile& file, int error_code) {
  const auto refuse = [&](const char* key) -> io::Json {
    throw Error(static_cast<ExitCode>(error_code), "'" + file.name() + "': its " + key + " metadata is not a JSON object");
  };
  const auto weights = file.metadata().find(kConfigKey);
  if (weights != file.metadata().end()) {
    io::Json config = io::Json::parse(weights->second, nullptr, /*allow_exceptions=*/false);
    return config.is_object() ? config : refuse(kConfigKey);
  }
  const auto checkpoint = file.metadata().find(kCheckpointMetadataKey);
  if (checkpoint == file.metadata().end()) return nullptr;
  const io::Json state = io::Json::parse(checkpoint->second, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("config") || !state["config"].is_object()) return refuse(kCheckpointMetadataKey);
  return state["config"];
}

std::map<std::string, std::string> model_metadata(const std::string& vocabulary, const std::string& config) {
  std::map<std::string, std::string> metadata = {{kConfigKey, config}};
  if (!vocabulary.empty()) metadata[kVocabularyKey] = vocabulary;
  return metadata;
}

}  // namespace mpiddp::checkpoint
