#include "mpiddp/tokenizer/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <unordered_map>

#include "mpiddp/core/crc32c.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/io/base64.hpp"

namespace mpiddp::tokenizer {

// Note [a text line by line]
// A text is encoded one line at a time, and each '\n' between lines is the model's own
// encoding of "\n" (one byte piece, <0x0A>, in a model mpiddp trained). SentencePiece trains
// on lines, so no piece spans a line's end, and line by line gives the ids a whole-text call
// gives for BPE; for unigram, whose best segmentation of a line can change when the line is
// glued to the next, it is the definition. It also bounds the work: unigram's lattice covers
// one line, not the 4 MB of a book. Decoding takes the ids whole: a model trained as below
// (no dummy prefix, no normalisation) gives back the text byte for byte.

namespace {

[[noreturn]] void fail(int error_code, const std::string& message) {
  throw Error(static_cast<ExitCode>(error_code), message);
}

// U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's mark of a space inside a piece.
constexpr std::string_view kSpaceMark = "\xE2\x96\x81";

Index bytes_of_piece(const std::string& piece) {
  Index marks = 0;
  for (size_t at = piece.find(kSpaceMark); at != std::string::npos; at = piece.find(kSpaceMark, at + kSpaceMark.size()))
    ++marks;
  return static_cast<Index>(piece.size()) - marks * static_cast<Index>(kSpaceMark.size() - 1);
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::string model_bytes, const std::string& where, int error_code)
    : model_bytes_(std::move(model_bytes)), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto status = processor_->LoadFromSerializedProto(model_bytes_);
  if (!status.ok()) fail(error_code, where + "is not a SentencePiece model (" + status.ToString() + ")");
  const int pieces = processor_->GetPieceSize();
  if (pieces <= 0) fail(error_code, where + "is a SentencePiece model without pieces");
  text_bytes_.resize(static_cast<size_t>(pieces));
  for (int id = 0; id < pieces; ++id) {
    Index bytes = 0;
    if (processor_->IsByte(id)) bytes = 1;
    else if (!processor_->IsControl(id) && !processor_->IsUnknown(id) && !processor_->IsUnused(id))
      bytes = bytes_of_piece(processor_->IdToPiece(id));
    text_bytes_[static_cast<size_t>(id)] = bytes;
  }
  std::vector<int> newline;
  processor_->Encode("\n", &newline);
  // Lines are encoded apart and joined by these ids (Note [a text line by line]): a model
  // that normalises "\n" away (SentencePiece's default nmt_nfkc does) would glue the lines
  // together, and a model that makes it <unk> would decode it as " \xE2\x81\x87 ".
  const bool lost = newline.empty() || std::any_of(newline.begin(), newline.end(), [&](int id) {
                      return processor_->IsUnknown(id);
                    });
  if (lost)
    fail(error_code, where + "is a SentencePiece model that cannot encode a line's end (\"\\n\" becomes " +
                         (newline.empty() ? std::string("nothing") : std::string("<unk>")) +
                         "): train one with `mpiddp tokenize`, which keeps every byte");
  newline_.assign(newline.begin(), newline.end());
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::shared_ptr<const SentencePieceTokenizer> SentencePieceTokenizer::load(const std::string& path) {
  const std::vector<char> bytes = io::read_whole_file(path, kExitData, "tokenizer");
  return std::make_shared<const SentencePieceTokenizer>(std::string(bytes.begin(), bytes.end()), "'" + path + "': ",
                                                        kExitData);
}

std::shared_ptr<const SentencePieceTokenizer> SentencePieceTokenizer::from_description(const io::Json& value,
                                                                                       const std::string& where,
                                                                                       int error_code) {
  if (!value.contains("model") || !value["model"].is_string())
    fail(error_code, where + "names \"sentencepiece\" but holds no \"model\" string");
  const std::optional<std::string> bytes = io::base64_decode(value["model"].get<std::string>());
  if (!bytes) fail(error_code, where + "holds a \"model\" that is not base64");
  if (!value.contains("crc32c") || !value["crc32c"].is_number_unsigned() ||
      value["crc32c"].get<uint64_t>() != crc32c(bytes->data(), bytes->size()))
    fail(error_code, where + "holds a SentencePiece model whose crc32c does not match its bytes (the file is damaged)");
  auto tokenizer = std::make_shared<const SentencePieceTokenizer>(*bytes, where, error_code);
  if (!value.contains("vocabulary") || value["vocabulary"] != tokenizer->vocabulary())
    fail(error_code, where + "says \"vocabulary\": " + value.value("vocabulary", io::Json()).dump() + " but its model has " +
                         std::to_string(tokenizer->vocabulary()) + " pieces");
  return tokenizer;
}

Index SentencePieceTokenizer::vocabulary() const { return processor_->GetPieceSize(); }

std::optional<Unencodable> SentencePieceTokenizer::first_unencodable(std::string_view text) const {
  // SentencePiece reads UTF-8 and replaces what is not with U+FFFD, which would decode to
  // other bytes: refused instead.
  if (const std::optional<size_t> at = first_invalid_utf8(text))
    return Unencodable{*at, "is not UTF-8, which a SentencePiece model reads"};
  return std::nullopt;
}

void SentencePieceTokenizer::encode_line(std::string_view line, std::vector<int32_t>& ids) const {
  std::vector<int> pieces;
  const auto status = processor_->Encode(absl::string_view(line.data(), line.size()), &pieces);
  if (!status.ok())
    throw Error(kExitFailure, "SentencePiece could not encode a line of " + std::to_string(line.size()) +
                                  " bytes: " + status.ToString());
  ids.insert(ids.end(), pieces.begin(), pieces.end());
}

std::vector<int32_t> SentencePieceTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  size_t begin = 0;
  while (true) {
    const size_t end = text.find('\n', begin);
    encode_line(text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin), ids);
    if (end == std::string_view::npos) break;
    ids.insert(ids.end(), newline_.begin(), newline_.end());
    begin = end + 1;
  }
  return ids;
}

std::string SentencePieceTokenizer::decode(std::span<const int32_t> ids) const {
  std::string text;
  const auto status = processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) throw Error(kExitFailure, "SentencePiece could not decode " + std::to_string(ids.size()) + " ids: " + status.ToString());
  return text;
}

std::string SentencePieceTokenizer::description() const {
  return io::Json{{"encoding", "sentencepiece"},
                  {"vocabulary", vocabulary()},
                  {"crc32c", crc32c(model_bytes_.data(), model_bytes_.size())},
                  {"model", io::base64_encode(model_bytes_)}}
      .dump();
}

// Note [how mpiddp trains a model]
// So that decode(encode(text)) is the text, byte for byte: no normalisation (NFKC would turn
// ligatures and full-width forms into others), no dummy space before each line and no merging
// of runs of spaces (both change the text), and byte fallback, so that a character outside the
// pieces becomes its UTF-8 bytes rather than <unk>. Lines are the training sentences; lines up
// to 64 KiB take part (SentencePiece's default drops those past 4 KiB).

namespace {

// The non-empty lines of the texts, in order.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string_view>& texts) : texts_(texts) { advance(); }
  bool done() const override { return text_ >= texts_.size(); }
  void Next() override { advance(); }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance() {
    while (text_ < texts_.size()) {
      const std::string_view text = texts_[text_];
      if (at_ >= text.size()) {
        ++text_;
        at_ = 0;
        continue;
      }
      size_t end = text.find('\n', at_);
      if (end == std::string_view::npos) end = text.size();
      line_.assign(text.substr(at_, end - at_));
      at_ = end + 1;
      if (!line_.empty()) return;
    }
  }
  const std::vector<std::string_view>& texts_;
  size_t text_ = 0, at_ = 0;
  std::string line_;
};

}  // namespace

std::string train_sentencepiece(const std::vector<std::string_view>& texts, const TrainingOptions& options) {
  const std::unordered_map<std::string, std::string> arguments = {
      {"vocab_size", std::to_string(options.vocabulary)},
      {"model_type", options.model_type},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"max_sentence_length", "65536"},
      {"input_sentence_size", "0"},
      {"num_threads", std::to_string(options.threads)},
      {"minloglevel", "2"},
  };
  LineIterator lines(texts);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(arguments, &lines, &model);
  if (!status.ok())
    throw Error(kExitConfig, "SentencePiece could not train a " + options.model_type + " model of --vocab " +
                                 std::to_string(options.vocabulary) + " on this text: " + status.ToString());
  return model;
}

}  // namespace mpiddp::tokenizer
