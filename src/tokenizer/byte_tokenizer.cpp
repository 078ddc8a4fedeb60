#include "mpiddp/tokenizer/byte_tokenizer.hpp"

#include <cstdio>

#include "mpiddp/core/error.hpp"

namespace mpiddp::tokenizer {

ByteTokenizer::ByteTokenizer(std::vector<unsigned char> bytes, std::string encoding)
    : bytes_(std::move(bytes)), encoding_(std::move(encoding)) {
  id_of_.fill(-1);
  for (size_t i = 0; i < bytes_.size(); ++i) id_of_[bytes_[i]] = static_cast<int32_t>(i);
}

ByteTokenizer ByteTokenizer::of_text(std::string_view text, const std::string& encoding) {
  std::vector<unsigned char> bytes;
  std::array<bool, 256> seen{};
  if (encoding == "bytes") seen.fill(true);
  for (const char c : text) seen[static_cast<unsigned char>(c)] = true;
  for (int b = 0; b < 256; ++b)
    if (seen[static_cast<size_t>(b)]) bytes.push_back(static_cast<unsigned char>(b));
  return ByteTokenizer(std::move(bytes), encoding);
}

std::shared_ptr<const ByteTokenizer> ByteTokenizer::from_description(const io::Json& value, const std::string& where,
                                                                     int error_code) {
  const auto refuse = [&](const std::string& why) -> std::shared_ptr<const ByteTokenizer> {
    throw Error(static_cast<ExitCode>(error_code), where + why);
  };
  if (!value.contains("bytes") || !value["bytes"].is_array()) return refuse("is not {\"encoding\": ..., \"bytes\": [...]}");
  std::vector<unsigned char> bytes;
  std::array<bool, 256> seen{};
  for (const io::Json& b : value["bytes"]) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() > 255)
      return refuse("holds " + b.dump() + ", not a byte");
    if (seen[b.get<size_t>()]) return refuse("holds byte " + b.dump() + " twice");
    seen[b.get<size_t>()] = true;
    bytes.push_back(static_cast<unsigned char>(b.get<int>()));
  }
  if (bytes.empty()) return refuse("is empty");
  // 0.2 wrote "encoding" beside the bytes; a value that is not "bytes" reads as "chars".
  const auto given = value.find("encoding");
  const std::string encoding = given != value.end() && *given == "bytes" ? "bytes" : "chars";
  return std::make_shared<const ByteTokenizer>(std::move(bytes), encoding);
}

std::optional<Unencodable> ByteTokenizer::first_unencodable(std::string_view text) const {
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (id_of_[byte] >= 0) continue;
    char shown[64];
    if (byte >= 32 && byte < 127) std::snprintf(shown, sizeof shown, "character '%c' (byte %d)", text[i], byte);
    else std::snprintf(shown, sizeof shown, "byte value %d", byte);
    return Unencodable{i, "is " + std::string(shown) + ", which is not in the vocabulary of " +
                              std::to_string(bytes_.size()) + " tokens"};
  }
  return std::nullopt;
}

std::vector<int32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = id_of_[static_cast<unsigned char>(text[i])];
  return ids;
}

std::string ByteTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text(ids.size(), '\0');
  for (size_t i = 0; i < ids.size(); ++i) text[i] = static_cast<char>(bytes_[static_cast<size_t>(ids[i])]);
  return text;
}

std::string ByteTokenizer::description() const {
  io::Json values = io::Json::array();
  for (const unsigned char b : bytes_) values.push_back(static_cast<int>(b));
  return io::Json{{"encoding", encoding_}, {"bytes", values}}.dump();
}

}  // namespace mpiddp::tokenizer
