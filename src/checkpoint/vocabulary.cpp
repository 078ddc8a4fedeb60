#include "mpiddp/checkpoint/vocabulary.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::checkpoint {

std::string vocabulary_metadata(const std::vector<unsigned char>& bytes, const std::string& encoding) {
  if (bytes.empty()) return "";
  io::Json values = io::Json::array();
  for (const unsigned char b : bytes) values.push_back(static_cast<int>(b));
  return io::Json{{"encoding", encoding}, {"bytes", values}}.dump();
}

std::vector<unsigned char> read_vocabulary(const io::SafetensorsFile& file, int error_code) {
  const auto found = file.metadata().find(kVocabularyKey);
  if (found == file.metadata().end()) return {};
  const io::Json value = io::Json::parse(found->second, nullptr, /*allow_exceptions=*/false);
  const auto refuse = [&](const std::string& why) -> std::vector<unsigned char> {
    throw Error(static_cast<ExitCode>(error_code), "'" + file.name() + "': its " + kVocabularyKey + " metadata " + why);
  };
  if (!value.is_object() || !value.contains("bytes") || !value["bytes"].is_array())
    return refuse("is not {\"encoding\": ..., \"bytes\": [...]}");
  std::vector<unsigned char> bytes;
  std::vector<bool> seen(256, false);
  for (const io::Json& b : value["bytes"]) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() > 255)
      return refuse("holds " + b.dump() + ", not a byte");
    if (seen[b.get<size_t>()]) return refuse("holds byte " + b.dump() + " twice");
    seen[b.get<size_t>()] = true;
    bytes.push_back(static_cast<unsigned char>(b.get<int>()));
  }
  if (bytes.empty()) return refuse("is empty");
  return bytes;
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
