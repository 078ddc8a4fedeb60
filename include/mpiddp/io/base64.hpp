#pragma once
// Base64 (RFC 4648, with padding): binary bytes in JSON text, such as a SentencePiece model in
// a weights file's metadata (tokenizer/sentencepiece_tokenizer.hpp).
#include <optional>
#include <string>
#include <string_view>

namespace mpiddp::io {

std::string base64_encode(std::string_view bytes);
// The bytes, or nullopt when `text` is not padded base64 (a stray character, a wrong length).
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace mpiddp::io
