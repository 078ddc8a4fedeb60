#pragma once
// init_std, the key every layer with weights takes: weights from N(0, init_std^2) and biases
// zero, as GPT recipes initialise them (nanoGPT's _init_weights, 0.02); norms keep their
// ones and zeros. Absent, each layer initialises as its PyTorch module does by default.
#include "mpiddp/core/rng.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::nn {

struct InitStd {
  double std = 0.0;  // > 0 when given; 0: PyTorch's default
  bool given() const { return std > 0.0; }
  // Reads "init_std" only when present, so a layer without it resolves as before.
  static InitStd parse(io::JsonSection& section);
};

// A weight tensor of a linear, convolution or attention projection: N(0, init_std^2) with
// init_std, else PyTorch's default U(-bound, bound) (bound 1 / sqrt(fan_in)).
template <typename T>
void initialize_weights(T* weights, Index count, const InitStd& init, double bound, Rng& rng);
// Its bias: zeros with init_std, else U(-bound, bound), drawn after the weights.
template <typename T>
void initialize_bias(T* bias, Index count, const InitStd& init, double bound, Rng& rng);

// values[i] = std * N(0, 1), drawn in order from rng.
template <typename T>
void fill_normal(T* values, Index count, double std, Rng& rng);

// values[i] = U(-bound, bound), drawn in order: PyTorch's default for linear and
// convolution weights and biases (bound 1 / sqrt(fan_in)).
template <typename T>
void fill_uniform(T* values, Index count, double bound, Rng& rng);

}  // namespace mpiddp::nn
