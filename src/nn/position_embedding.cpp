#include "mpiddp/nn/position_embedding.hpp"

#include "mpiddp/core/error.hpp"

namespace mpiddp::nn {

PositionEmbeddingOptions PositionEmbeddingOptions::parse(io::JsonSection& section) {
  if (!section.has("positions")) throw ConfigError(section.key_path("positions"), "required key is missing");
  PositionEmbeddingOptions options;
  options.positions = section.integer("positions", 0, 1, 1 << 24);
  options.init = InitStd::parse(section);
  return options;
}

namespace {

const Shape& positioned_input(const PositionEmbeddingOptions& options, const Shape& input, const std::string& key) {
  if (input.size() != 2)
    throw ConfigError(key, "position_embedding takes a sequence (T, C) but gets " + shape_text(input));
  if (input[0] > options.positions)
    throw ConfigError(key + ".positions", "the sequence has " + std::to_string(input[0]) + " positions but the table " +
                                              std::to_string(options.positions) + "; T must be at most positions");
  return input;
}

}  // namespace

template <typename T>
PositionEmbedding<T>::PositionEmbedding(const PositionEmbeddingOptions& options, const Shape& input,
                                        const std::string& key)
    : Layer<T>(positioned_input(options, input, key), input), positions_(options.positions), width_(input[1]), init_(options.init) {}

template <typename T>
std::vector<TensorSpec> PositionEmbedding<T>::parameters() const {
  return {{"weight", {positions_, width_}}};
}

template <typename T>
void PositionEmbedding<T>::bind(const LayerMemory<T>& memory) {
  weight_ = memory.parameters;
  weight_grad_ = memory.gradients;
}

template <typename T>
void PositionEmbedding<T>::initialize(Rng& rng) {
  fill_normal(weight_, positions_ * width_, init_.given() ? init_.std : 1.0, rng);
}

// A sample's column is its T rows of C one after another, so the first T rows of the table,
// as one column of T C values, are added to every column.
template <typename T>
void PositionEmbedding<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  const Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, 1>> table(weight_, this->inputs());
  y = x.colwise() + table;
}

// d weight[t] = sum over the samples of dy[t], added sample after sample; dx = dy.
template <typename T>
void PositionEmbedding<T>::backward(const PassContext&, ConstMatrixView<T>, ConstMatrixView<T>,
                                    ConstMatrixView<T> dy, MatrixView<T>* dx) {
  VectorView<T> grad(weight_grad_, this->inputs());
  for (Index s = 0; s < dy.cols(); ++s) grad += dy.col(s);
  if (dx) *dx = dy;
}

template class PositionEmbedding<float>;
template class PositionEmbedding<double>;

}  // namespace mpiddp::nn
