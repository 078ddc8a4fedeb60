#pragma once
// Bytes as tokens: the text source's "chars" (the sorted distinct bytes of the training text,
// as nanoGPT's shakespeare_char prepares it: token id i is the i-th of them) and "bytes" (all
// 256, the id the byte). Its description is {"encoding": E, "bytes": [10, 32, 33, ...]}.
#include <array>
#include <string>
#include <vector>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/tokenizer/tokenizer.hpp"

namespace mpiddp::tokenizer {

class ByteTokenizer final : public Tokenizer {
 public:
  // bytes: token id i is bytes[i]; distinct, not empty. encoding: "chars" or "bytes".
  ByteTokenizer(std::vector<unsigned char> bytes, std::string encoding);
  // The vocabulary of a text: its sorted distinct bytes ("chars") or all 256 ("bytes").
  static ByteTokenizer of_text(std::string_view text, const std::string& encoding);
  // From a description; an Error(error_code) names `where` and the fault.
  static std::shared_ptr<const ByteTokenizer> from_description(const io::Json& description, const std::string& where,
                                                               int error_code);

  std::string encoding() const override { return encoding_; }
  Index vocabulary() const override { return static_cast<Index>(bytes_.size()); }
  std::optional<Unencodable> first_unencodable(std::string_view text) const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  Index text_bytes(int32_t) const override { return 1; }
  std::vector<int32_t> start_of_text() const override { return {0}; }  // the first byte: "\n" in most texts
  std::string description() const override;

  const std::vector<unsigned char>& bytes() const { return bytes_; }

 private:
  std::vector<unsigned char> bytes_;   // id -> byte
  std::array<int32_t, 256> id_of_{};   // byte -> id, -1 outside the vocabulary
  std::string encoding_;
};

}  // namespace mpiddp::tokenizer
