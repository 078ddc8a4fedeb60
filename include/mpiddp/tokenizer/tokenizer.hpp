#pragma once
// A language model's tokenizer: text to token ids and back. Two kinds:
//   bytes as tokens, the text source's "chars" and "bytes" (tokenizer/byte_tokenizer.hpp);
//   a SentencePiece model, subwords (tokenizer/sentencepiece_tokenizer.hpp).
// The tokenizer travels with the weights as its description, the value of the
// mpiddp_vocabulary metadata (checkpoint/vocabulary.hpp), and comes back from it through
// tokenizer_from_description. Local: no MPI, no state changed by use.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mpiddp/core/types.hpp"

namespace mpiddp::tokenizer {

// Where and why a text cannot be encoded: its first offending byte.
struct Unencodable {
  size_t offset = 0;  // 0-based, in the text
  std::string why;    // "is not UTF-8", "byte 0x7e is not in the vocabulary of 63 tokens"
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // "chars", "bytes" or "sentencepiece": what the text source's "encoding" key names.
  virtual std::string encoding() const = 0;
  // The ids lie in [0, vocabulary()).
  virtual Index vocabulary() const = 0;
  // Where the text cannot be encoded, or nullopt. encode() takes only texts without one.
  virtual std::optional<Unencodable> first_unencodable(std::string_view text) const = 0;
  // The text's ids (Note [a text line by line] in src/tokenizer/sentencepiece_tokenizer.cpp).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The text of ids, each in [0, vocabulary()).
  virtual std::string decode(std::span<const int32_t> ids) const = 0;
  // The bytes of text token `id` stands for: 1 for a byte; a subword's UTF-8 length. The
  // evaluation's bits per byte divide by their sum (train/evaluator.hpp).
  virtual Index text_bytes(int32_t id) const = 0;
  // What generation starts from when the prompt is empty: the beginning of a line.
  virtual std::vector<int32_t> start_of_text() const = 0;
  // The mpiddp_vocabulary metadata value: JSON naming the encoding and holding what rebuilds
  // this tokenizer (a byte list, or the SentencePiece model's bytes).
  virtual std::string description() const = 0;
};

// The tokenizer a description holds. An Error(error_code) names `where` (a file) and what is
// wrong when it is not one mpiddp wrote.
std::shared_ptr<const Tokenizer> tokenizer_from_description(const std::string& description, const std::string& where,
                                                            int error_code);

// The offset of the first byte of `text` that does not begin or continue a well-formed UTF-8
// character (overlong forms, surrogates and code points past U+10FFFF included), or nullopt.
std::optional<size_t> first_invalid_utf8(std::string_view text);

}  // namespace mpiddp::tokenizer
