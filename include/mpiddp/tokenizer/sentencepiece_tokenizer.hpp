#pragma once
// A SentencePiece model (BPE or unigram subwords, Debian's libsentencepiece) as a Tokenizer,
// and the training of one from raw text. Its description is
// {"encoding": "sentencepiece", "vocabulary": V, "crc32c": C, "model": BASE64}: the model's
// serialized bytes, so that a weights file decodes its ids without the .model file.
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/tokenizer/tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace mpiddp::tokenizer {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // The model's serialized bytes; an Error(error_code) names `where` when they are not a model.
  SentencePieceTokenizer(std::string model_bytes, const std::string& where, int error_code);
  ~SentencePieceTokenizer() override;
  // A .model file: a DataError (exit 3) names it when it is missing or not a model.
  static std::shared_ptr<const SentencePieceTokenizer> load(const std::string& path);
  // From a description; an Error(error_code) names `where` and the fault.
  static std::shared_ptr<const SentencePieceTokenizer> from_description(const io::Json& description,
                                                                        const std::string& where, int error_code);

  std::string encoding() const override { return "sentencepiece"; }
  Index vocabulary() const override;
  std::optional<Unencodable> first_unencodable(std::string_view text) const override;
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(std::span<const int32_t> ids) const override;
  Index text_bytes(int32_t id) const override { return text_bytes_[static_cast<size_t>(id)]; }
  std::vector<int32_t> start_of_text() const override { return newline_; }
  std::string description() const override;

  // The serialized model, as a .model file holds it.
  const std::string& model_bytes() const { return model_bytes_; }
  // The pieces of one line (no '\n' in it).
  void encode_line(std::string_view line, std::vector<int32_t>& ids) const;
  // The ids of "\n" (one byte piece in a model mpiddp trained).
  const std::vector<int32_t>& newline() const { return newline_; }

 private:
  std::string model_bytes_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  std::vector<int32_t> newline_;
  std::vector<Index> text_bytes_;  // (vocabulary)
};

struct TrainingOptions {
  Index vocabulary = 4096;
  std::string model_type = "bpe";  // "bpe" | "unigram"
  int threads = 1;
};

// Trains a model on the lines of `texts` (Note [how mpiddp trains a model] in the .cpp): its
// serialized bytes. An Error(kExitConfig) names --vocab when the text cannot fill the vocabulary.
std::string train_sentencepiece(const std::vector<std::string_view>& texts, const TrainingOptions& options);

}  // namespace mpiddp::tokenizer
