#pragma once
// nanoGPT at its smallest, for the trainer's language-model tests: two pre-LayerNorm blocks
// (attention of 2 heads with attention dropout 0.1; an MLP of 4 × dim with gelu and dropout
// 0.1), a final LayerNorm and a head tied to the token embedding, over the 7 tokens of
// token_files.hpp's text; AdamW with nanoGPT's decay rule and clipping; products on Eigen.
// Each test picks the sizes and the run around them.
#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "token_files.hpp"

namespace mpiddp::test {

struct TinyGpt {
  int dim = 16;        // the embedding's width; the MLP's is 4 × dim
  int positions = 8;   // the context, and the text source's block
  int batch = 24;      // batch.global
  int seed = 11;
  int epochs = 3;
  const char* clip_grad_norm = "0.1";  // as the JSON number is written
};

// The config of that model training on the text file at text_path.
inline io::Json tiny_gpt_config(const TinyGpt& g, const std::string& text_path) {
  const std::string dim = std::to_string(g.dim), vocabulary = std::to_string(kTokenVocabulary);
  const std::string block = R"(
      {"type": "residual", "layers": [{"type": "layernorm"},
                                      {"type": "attention", "heads": 2, "dropout": 0.1, "init_std": 0.02}]},
      {"type": "residual", "layers": [{"type": "layernorm"}, {"type": "linear", "out": )" + std::to_string(4 * g.dim) +
                            R"(, "init_std": 0.02},
                                      {"type": "gelu"}, {"type": "linear", "out": )" + dim + R"(, "init_std": 0.02},
                                      {"type": "dropout", "p": 0.1}]})";
  io::Json user = io::Json::parse(R"({
    "seed": )" + std::to_string(g.seed) + R"(, "epochs": )" + std::to_string(g.epochs) + R"(,
    "model": {"layers": [
      {"type": "embedding", "vocab": )" + vocabulary + R"(, "dim": )" + dim + R"(, "init_std": 0.02},
      {"type": "position_embedding", "positions": )" + std::to_string(g.positions) + R"(, "init_std": 0.02},)" +
                                  block + "," + block + R"(,
      {"type": "layernorm"},
      {"type": "linear", "out": )" + vocabulary + R"(, "bias": false, "tied_to": "0.weight"}]},
    "loss": "cross_entropy",
    "batch": {"global": )" + std::to_string(g.batch) + R"(},
    "optimizer": {"type": "adamw", "lr": 0.01, "weight_decay": 0.1, "decay": "matrices", "clip_grad_norm": )" +
                                  g.clip_grad_norm + R"(},
    "compute": {"gemm": "eigen"}
  })");
  user["data"]["train"] = {{"source", "text"}, {"path", text_path}, {"block", g.positions}};
  return user;
}

}  // namespace mpiddp::test
