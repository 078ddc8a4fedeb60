#include "mpiddp/nn/embedding.hpp"

#include <algorithm>
#include <stdexcept>

#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {

EmbeddingOptions EmbeddingOptions::parse(io::JsonSection& section) {
  for (const char* key : {"vocab", "dim"})
    if (!section.has(key)) throw ConfigError(section.key_path(key), "required key is missing");
  EmbeddingOptions options;
  options.vocab = section.integer("vocab", 0, 1, 1 << 24);
  options.dim = section.integer("dim", 0, 1, 1 << 20);
  options.init = InitStd::parse(section);
  return options;
}

namespace {

Shape embedding_output(const EmbeddingOptions& options, const Shape& input, const std::string& key) {
  if (input.size() != 1)
    throw ConfigError(key, "embedding takes a sequence of token ids, shape (T), but gets " + shape_text(input));
  return {input[0], options.dim};
}

}  // namespace

template <typename T>
Embedding<T>::Embedding(const EmbeddingOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(input, embedding_output(options, input, key)), vocab_(options.vocab), dim_(options.dim), init_(options.init) {}

template <typename T>
std::string Embedding<T>::describe() const {
  return "embedding" + std::to_string(vocab_) + "x" + std::to_string(dim_);
}

template <typename T>
std::vector<TensorSpec> Embedding<T>::parameters() const {
  return {{"weight", {vocab_, dim_}}};
}

template <typename T>
void Embedding<T>::bind(const LayerMemory<T>& memory) {
  weight_ = memory.parameters;
  weight_grad_ = memory.gradients;
}

template <typename T>
void Embedding<T>::initialize(Rng& rng) {
  fill_normal(weight_, vocab_ * dim_, init_.given() ? init_.std : 1.0, rng);
}

template <typename T>
void Embedding<T>::forward_ids(const PassContext&, const int32_t* ids, Index batch, MatrixView<T> y) {
  const Index positions = this->inputs();
  for (Index p = 0; p < positions * batch; ++p)
    std::copy_n(weight_ + static_cast<Index>(ids[p]) * dim_, dim_, y.data() + p * dim_);
}

// Rows of repeated ids are added in the batch's order (sample by sample, position by
// position), the same order at every run.
template <typename T>
void Embedding<T>::backward_ids(const PassContext&, const int32_t* ids, Index batch, ConstMatrixView<T> dy) {
  const Index positions = this->inputs();
  for (Index p = 0; p < positions * batch; ++p) {
    T* row = weight_grad_ + static_cast<Index>(ids[p]) * dim_;
    const T* g = dy.data() + p * dim_;
    for (Index d = 0; d < dim_; ++d) row[d] += g[d];
  }
}

template <typename T>
void Embedding<T>::forward(const PassContext&, ConstMatrixView<T>, MatrixView<T>) {
  throw std::logic_error("embedding: forward on values; a model feeds it token ids");
}

template <typename T>
void Embedding<T>::backward(const PassContext&, ConstMatrixView<T>, ConstMatrixView<T>, ConstMatrixView<T>,
                            MatrixView<T>*) {
  throw std::logic_error("embedding: backward on values; a model feeds it token ids");
}

template class Embedding<float>;
template class Embedding<double>;

}  // namespace mpiddp::nn
