#pragma once
// The "text" source: a text file as token ids, in windows (data/token_windows.hpp).
// encoding "chars": the vocabulary is the sorted distinct bytes of the whole file (as nanoGPT's
// shakespeare_char prepares it), token id i the i-th of them; "bytes": all 256, the id the byte.
// Each rank holds the file's tokens once, as int32.
#include <string>
#include <vector>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/token_windows.hpp"

namespace mpiddp::data {

struct TextConfig {
  std::string path;
  std::string encoding = "chars";  // "chars" | "bytes"
  WindowConfig windows;
};

// A text file's bytes, whole (a DataError naming it when it cannot be read).
std::string read_text_file(const std::string& path);

// The vocabulary of a text file: its sorted distinct bytes ("chars") or all 256 ("bytes").
std::vector<unsigned char> text_vocabulary(const std::string& bytes, const std::string& encoding);

// A DataError names the file when it is empty, or when the range holds no window.
template <typename T>
Dataset<T> load_text(const TextConfig& config);

}  // namespace mpiddp::data
