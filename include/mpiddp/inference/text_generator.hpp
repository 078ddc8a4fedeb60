#pragma once
// Text from a trained language model, as nanoGPT's sample.py makes it: the logits of the
// context's last position, divided by the temperature, cut to the k largest, sampled; the
// token joins the context (its last `block` tokens once it grows longer), again and again.
//
// The model, its weights and its tokenizer come from a weights file or a checkpoint of
// `mpiddp train`, which carry the config and the tokenizer (checkpoint/vocabulary.hpp): bytes
// as tokens, or a SentencePiece model. Another program's weights file needs the config
// (--config), whose training data then give the tokenizer (a text source's, or a tokens
// source's "tokenizer"). One process, no MPI.
#include <cstdint>
#include <memory>
#include <string>

#include "mpiddp/core/types.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::inference {

struct SamplingOptions {
  int64_t tokens = 200;       // how many to generate
  double temperature = 1.0;   // > 0; the logits are divided by it
  Index top_k = 0;            // sample among the k likeliest; 0: among all
  uint64_t seed = 1337;       // the same seed, the same text
};

class TextGenerator {
 public:
  virtual ~TextGenerator() = default;
  // The prompt's continuation (the generated text alone). A ConfigError (exit 2) names a
  // prompt byte the tokenizer cannot encode (outside a byte vocabulary; not UTF-8 for
  // SentencePiece), or a prompt of more tokens than the model's context. An empty prompt
  // starts at the beginning of a line (Tokenizer::start_of_text).
  virtual std::string continue_text(const std::string& prompt, const SamplingOptions& options) = 0;
  // The context the model reads: block positions.
  virtual Index context() const = 0;
};

// path: a weights file or checkpoint. config: the user's config, or null for the one the file
// carries. A ConfigError when the model is not a language model (token ids in, a class per
// position out, causal), when neither carries a config, when there is no tokenizer to decode
// with, or when the file's tokenizer is not the one the user's config names; a DataError or
// Error(kExitCheckpoint) when the file cannot be read or does not fit the model.
std::unique_ptr<TextGenerator> load_text_generator(const std::string& path, const io::Json* config);

}  // namespace mpiddp::inference
