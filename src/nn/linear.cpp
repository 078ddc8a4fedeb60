#include "mpiddp/nn/linear.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/finite.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/kernels/grid_product.hpp"
#include "mpiddp/kernels/row_sums.hpp"
#include "mpiddp/nn/initialization.hpp"

namespace mpiddp::nn {

LinearOptions LinearOptions::parse(io::JsonSection& section) {
  if (!section.has("out")) throw ConfigError(section.key_path("out"), "required key is missing");
  LinearOptions options;
  options.out = section.integer("out", 0, 1, 1 << 24);
  // Read only when given, so that a linear without them resolves as before.
  if (section.has("bias")) options.bias = section.boolean("bias", true);
  if (section.has("tied_to")) {
    options.tied_to = section.text("tied_to", "");
    if (options.tied_to.empty())
      throw ConfigError(section.key_path("tied_to"), "expected a tensor name of an earlier layer, like \"0.weight\"");
  }
  options.key = section.key_path("tied_to");
  options.init = InitStd::parse(section);
  return options;
}

namespace {

// nn.Linear acts on the last dimension: (F) -> (out), and a sequence (T, F) -> (T, out).
Shape linear_output(const LinearOptions& options, const Shape& input, const std::string& key) {
  if (input.size() != 1 && input.size() != 2)
    throw ConfigError(key, "linear needs a flat input (F) or a sequence (T, F) but gets " + shape_text(input) +
                               "; put a flatten (or global_avgpool) layer before it");
  Shape output = input;
  output.back() = options.out;
  return output;
}

}  // namespace

template <typename T>
Linear<T>::Linear(const LinearOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(input, linear_output(options, input, key)),
      in_(input.back()),
      out_(options.out),
      positions_(input.size() == 2 ? input.front() : 1),
      has_bias_(options.bias),
      tied_to_(options.tied_to),
      key_(options.key),
      init_(options.init) {}

template <typename T>
std::string Linear<T>::describe() const {
  return "linear" + std::to_string(out_) + (has_bias_ ? "" : "nobias") + (tied_to_.empty() ? "" : "tied" + tied_to_);
}

template <typename T>
std::vector<TensorSpec> Linear<T>::parameters() const {
  std::vector<TensorSpec> specs;
  if (tied_to_.empty()) specs.push_back({"weight", {out_, in_}});
  if (has_bias_) specs.push_back({"bias", {out_}});
  return specs;
}

template <typename T>
std::vector<TiedTensor> Linear<T>::tied_tensors() const {
  if (tied_to_.empty()) return {};
  return {{"weight", tied_to_, {out_, in_}, key_, 0}};
}

template <typename T>
void Linear<T>::bind(const LayerMemory<T>& memory) {
  T* own = memory.parameters;
  T* own_grad = memory.gradients;
  if (tied_to_.empty()) {
    weight_ = own;
    weight_grad_ = own_grad;
    own += out_ * in_;
    own_grad += out_ * in_;
  } else {
    // The model has checked the tie (Model::tie_tensors), so the target is there.
    for (const ParameterTensor& tensor : *memory.model_tensors)
      if (tensor.name == tied_to_) {
        weight_ = memory.model_parameters + tensor.offset;
        weight_grad_ = memory.model_gradients + tensor.offset;
      }
  }
  bias_ = has_bias_ ? own : nullptr;
  bias_grad_ = has_bias_ ? own_grad : nullptr;
}

template <typename T>
void Linear<T>::initialize(Rng& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(in_));
  if (tied_to_.empty()) initialize_weights(weight_, out_ * in_, init_, bound, rng);
  if (has_bias_) initialize_bias(bias_, out_, init_, bound, rng);
}

template <typename T>
void Linear<T>::forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) {
  ConstMatrixView<T> wt(weight_, in_, out_);
  // y = W x + b, written as (W^T)^T x so Eigen's GEMM reads the weights in place. The bias
  // goes in first and the product is added to it: "=" would zero y and then add anyway, so
  // the bias costs no pass of its own. A sequence's positions are columns of their own.
  MatrixView<T> ys = by_position(y);
  if (bias_) ys.colwise() = VectorView<T>(bias_, out_);
  else ys.setZero();
  kernels::multiply_in_pieces(ys, wt, kernels::Op::kTranspose, by_position(x), kernels::Accumulate::kAdd,
                              context.forward_columns);
}

namespace {

// An eighth of a core's L2 for a block of the weight gradient (F rows, a multiple of 4
// columns): the block and its int64 sums stay in cache while every chunk is added to them.
constexpr size_t kGridBlockBytes = 128 * 1024;

}  // namespace

template <typename T>
bool Linear<T>::supports_chunked_pass(Index chunk) const {
  // Eigen's GEMM computes each column with the same instructions when the width is a whole
  // number of its nr-column panels; below EIGEN_GEMM_TO_COEFFBASED_THRESHOLD (rows + columns
  // + depth) it takes a coefficient-based product instead, whose sums are ordered otherwise,
  // so a pass of one chunk (at N = C) and one of many must both stay above it.
  // On a sequence a chunk's columns are its samples' positions: not taken (chunk by chunk).
  constexpr Index kPanel = Eigen::internal::gebp_traits<T, T>::nr;
  return positions_ == 1 && has_bias_ && tied_to_.empty() && chunk % kPanel == 0 && in_ + out_ + chunk >= EIGEN_GEMM_TO_COEFFBASED_THRESHOLD;
}

template <typename T>
void Linear<T>::parameter_gradients_onto_grid(const PassContext& context, ConstMatrixView<T> x,
                                              ConstMatrixView<T> dy) {
  GradientGrid& grid = *context.gradient_grid;
  const Index o = out_, chunk = context.chunk_columns;
  const Index chunks = x.cols() / chunk;
  // A chunk's gradient of weight (o, f) sums `chunk` products x[f, s] dy[o, s], each at most
  // max|x| max|dy|, and float rounding adds less than chunk * eps of that: twice the sum
  // bounds every chunk's value with room to spare. The maxima are every rank's (collective).
  double maxima[2] = {largest_magnitude(x.data(), static_cast<size_t>(x.size())),
                      largest_magnitude(dy.data(), static_cast<size_t>(dy.size()))};
  grid.max_over_ranks(maxima, 2);
  const double per_chunk = 2.0 * static_cast<double>(chunk);
  const GradientGrid::Tensor weights = grid.tensor(weight_grad_, per_chunk * maxima[0] * maxima[1]);
  const GradientGrid::Tensor bias = grid.tensor(bias_grad_, per_chunk * maxima[1]);
  // Every chunk in one kernel of ours for float (Note [the grid product]), else each chunk's
  // product by the library and converted after.
  if (!weight_gradient_by_grid_product(grid, x, dy, chunk, weights))
    weight_gradient_by_library(grid, x, dy, chunk, weights);
  VectorView<T> db(static_cast<T*>(grid.scratch(scratch_values_bytes<T>(o))), o);
  for (Index t = 0; t < chunks; ++t) {
    db.setZero();
    kernels::add_row_sums(dy, t * chunk, chunk, db);
    grid.add(db.data(), static_cast<size_t>(o), bias, 0, t == 0);
  }
}

template <typename T>
bool Linear<T>::weight_gradient_by_grid_product(GradientGrid& grid, ConstMatrixView<T> x, ConstMatrixView<T> dy,
                                                Index chunk, const GradientGrid::Tensor& weights) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;  // the kernel is float's
  } else {
    if (!kernels::grid_product_serves<T>()) return false;
    const Index f = in_, o = out_;
    if (weights.finite)
      kernels::grid_product(x.data(), f, dy.data(), o, chunk, x.cols() / chunk, weights.shift, weights.sums, false,
                   static_cast<float*>(grid.scratch(kernels::grid_product_scratch_bytes(f, o, x.cols()))));
    else
      std::fill_n(weights.sums, f * o, int64_t{0});  // as GradientGrid::add does for a non-finite tensor
    return true;
  }
}

template <typename T>
void Linear<T>::weight_gradient_by_library(GradientGrid& grid, ConstMatrixView<T> x, ConstMatrixView<T> dy,
                                           Index chunk, const GradientGrid::Tensor& weights) {
  const Index f = in_, o = out_, chunks = x.cols() / chunk;
  // Blocks of `width` outputs: dW^T[:, block] = x_t dy_t[block, :]^T for each chunk t, each
  // product of the same shape at every N, then onto the grid while the block is in cache.
  const Index fitting = static_cast<Index>(kGridBlockBytes / (static_cast<size_t>(f) * sizeof(T))) / 4 * 4;
  const Index width = std::min(o, std::max<Index>(4, fitting));
  T* block = static_cast<T*>(grid.scratch(scratch_values_bytes<T>(f * width) + scratch_values_bytes<T>(width * chunk)));
  T* dy_block = block + scratch_values_bytes<T>(f * width) / sizeof(T);
  for (Index first = 0; first < o; first += width) {
    const Index n = std::min(width, o - first);
    for (Index t = 0; t < chunks; ++t) {
      MatrixView<T> rows(dy_block, n, chunk);  // dy_t[block, :], contiguous for the product
      rows = dy.block(first, t * chunk, n, chunk);
      kernels::multiply(MatrixView<T>(block, f, n), ConstMatrixView<T>(x.data() + t * chunk * f, f, chunk),
               kernels::Op::kNone, ConstMatrixView<T>(dy_block, n, chunk), kernels::Op::kTranspose, kernels::Accumulate::kOverwrite);
      grid.add(block, static_cast<size_t>(f * n), weights, static_cast<size_t>(first * f), t == 0);
    }
  }
}

template <typename T>
void Linear<T>::backward(const PassContext& context, ConstMatrixView<T> x_samples, ConstMatrixView<T>,
                         ConstMatrixView<T> dy_samples, MatrixView<T>* dx) {
  const ConstMatrixView<T> x = by_position(x_samples), dy = by_position(dy_samples);
  if (context.chunk_columns == 0) {
    MatrixView<T> dwt(weight_grad_, in_, out_);
    // dW^T (+)= x dy^T: (F, B)(B, O), written on a step's first micro-batch (Note [gradients
    // written, not cleared] in sequential.cpp); a tied W's is added to its owner's, always.
    const bool overwrite_weight = context.overwrite_gradients && tied_to_.empty();
    kernels::multiply(dwt, x, kernels::Op::kNone, dy, kernels::Op::kTranspose,
             overwrite_weight ? kernels::Accumulate::kOverwrite : kernels::Accumulate::kAdd);
    if (bias_grad_) {
      VectorView<T> db(bias_grad_, out_);
      if (context.overwrite_gradients) db.setZero();  // O values: the row sums' order stays as it was
      kernels::add_row_sums(dy, 0, dy.cols(), db);
    }
  } else {
    parameter_gradients_onto_grid(context, x, dy);
  }
  if (dx) {
    ConstMatrixView<T> wt(weight_, in_, out_);
    // dx = W^T dy: (F, O)(O, B)
    MatrixView<T> dxs = by_position(*dx);
    kernels::multiply_in_pieces(dxs, wt, kernels::Op::kNone, dy, kernels::Accumulate::kOverwrite,
                                context.input_gradient_columns);
  }
}

template <typename T>
void Linear<T>::gemm_calls(Index samples, std::vector<kernels::GemmCall>& calls) const {
  const Index f = in_, o = out_, batch = samples * positions_;
  calls.push_back({{o, batch, f, kernels::Op::kTranspose, kernels::Op::kNone}, 1, kernels::GemmRole::kForward});
  calls.push_back({{f, o, batch, kernels::Op::kNone, kernels::Op::kTranspose}, 1, kernels::GemmRole::kWeightGradient});
  calls.push_back({{f, batch, o, kernels::Op::kNone, kernels::Op::kNone}, 1, kernels::GemmRole::kInputGradient});
}

template class Linear<float>;
template class Linear<double>;

}  // namespace mpiddp::nn
