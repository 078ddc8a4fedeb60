#pragma once
// The "tokens" source: token ids that other tools write, in windows (data/token_windows.hpp).
// A file ending in .npy is a 1-D integer array (uint8, int32 or int64); any other is raw
// little-endian uint16 after header_bytes bytes: nanoGPT's prepare.py .bin files (header 0) and
// llm.c's (a 1024-byte header). Each rank holds the ids once, as int32. With "tokenizer" (a
// SentencePiece .model, such as `mpiddp tokenize` writes beside its .bin files), the ids know
// their text: "vocab" may be left out, evaluations report bits per byte, and the weights carry it.
#include <string>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/token_windows.hpp"

namespace mpiddp::data {

struct TokensConfig {
  std::string path;
  Index vocab = 0;          // the ids lie in [0, vocab); 0: the tokenizer's vocabulary
  std::string tokenizer;    // a SentencePiece .model, or ""
  Index header_bytes = 0;   // .bin: bytes before the first token
  WindowConfig windows;
};

// A DataError names the file: an id outside [0, vocab) (with its 0-based place), a .bin whose
// size after the header is not whole uint16 tokens, a .npy that is not 1-D, no window; a
// tokenizer that is missing, not a model, or of another vocabulary than "vocab".
template <typename T>
Dataset<T> load_tokens(const TokensConfig& config);

}  // namespace mpiddp::data
