#pragma once
// The "text" source: a text file as token ids, in windows (data/token_windows.hpp).
// encoding "chars": the vocabulary is the sorted distinct bytes of the whole file (as nanoGPT's
// shakespeare_char prepares it), token id i the i-th of them; "bytes": all 256, the id the byte;
// "sentencepiece": the subwords of the SentencePiece model `tokenizer` (a .model file, such as
// `mpiddp tokenize` writes), the text encoded line by line (tokenizer/tokenizer.hpp).
// Each rank encodes the file once at load, the same ids on every rank, and holds them as int32.
#include <memory>
#include <string>
#include <string_view>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/token_windows.hpp"
#include "mpiddp/tokenizer/tokenizer.hpp"

namespace mpiddp::data {

struct TextConfig {
  std::string path;
  std::string encoding = "chars";  // "chars" | "bytes" | "sentencepiece"
  std::string tokenizer;           // the .model file of "sentencepiece"
  WindowConfig windows;
};

// A text file's bytes, whole (a DataError naming it when it cannot be read).
std::string read_text_file(const std::string& path);

// Where byte `offset` of a file's text is, for messages: "PATH: line L, byte B (0-based, in the file)".
std::string position_in_text(const std::string& path, std::string_view text, size_t offset);

// The tokenizer of a text source: "chars" reads the text file for its bytes; "sentencepiece"
// loads the model (a DataError names the file that is missing or not a model).
std::shared_ptr<const tokenizer::Tokenizer> load_text_tokenizer(const TextConfig& config);

// A DataError names the file when it is empty, when a line is not what the tokenizer reads
// (not UTF-8, for SentencePiece: the line and byte), or when the range holds no window.
template <typename T>
Dataset<T> load_text(const TextConfig& config);

}  // namespace mpiddp::data
