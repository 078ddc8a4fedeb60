#include "mpiddp/tokenizer/tokenizer.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/tokenizer/byte_tokenizer.hpp"
#include "mpiddp/tokenizer/sentencepiece_tokenizer.hpp"

namespace mpiddp::tokenizer {

std::shared_ptr<const Tokenizer> tokenizer_from_description(const std::string& description, const std::string& where,
                                                            int error_code) {
  const io::Json value = io::Json::parse(description, nullptr, /*allow_exceptions=*/false);
  if (!value.is_object())
    throw Error(static_cast<ExitCode>(error_code), where + "is not a JSON object");
  const auto encoding = value.find("encoding");
  if (encoding != value.end() && !encoding->is_string())
    throw Error(static_cast<ExitCode>(error_code), where + "has an \"encoding\" that is not a string: " + encoding->dump());
  if (encoding != value.end() && *encoding == "sentencepiece")
    return SentencePieceTokenizer::from_description(value, where, error_code);
  return ByteTokenizer::from_description(value, where, error_code);
}

std::optional<size_t> first_invalid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char lead = s[i];
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The continuation bytes a lead byte announces, and the smallest code point the form may
    // hold (smaller ones are overlong forms).
    size_t length;
    uint32_t code, smallest;
    if ((lead & 0xE0) == 0xC0) length = 2, code = lead & 0x1Fu, smallest = 0x80;
    else if ((lead & 0xF0) == 0xE0) length = 3, code = lead & 0x0Fu, smallest = 0x800;
    else if ((lead & 0xF8) == 0xF0) length = 4, code = lead & 0x07u, smallest = 0x10000;
    else return i;
    if (i + length > n) return i;
    for (size_t k = 1; k < length; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      code = (code << 6) | (s[i + k] & 0x3Fu);
    }
    if (code < smallest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return i;
    i += length;
  }
  return std::nullopt;
}

}  // namespace mpiddp::tokenizer
