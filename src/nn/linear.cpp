#include "mpiddp/nn/linear.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/gemm.hpp"

namespace mpiddp::nn {

LinearOptions LinearOptions::parse(io::JsonSection& section) {
  if (!section.has("out")) throw ConfigError(section.key_path("out"), "required key is missing");
  return {section.integer("out", 0, 1, 1 << 24)};
}

namespace {

Shape linear_output(const LinearOptions& options, const Shape& input, const std::string& key) {
  if (input.size() != 1)
    throw ConfigError(key, "linear needs a flat input but gets " + shape_text(input) +
                               "; put a flatten (or global_avgpool) layer before it");
  return {options.out};
}

}  // namespace

template <typename T>
Linear<T>::Linear(const LinearOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(input, linear_output(options, input, key)) {}

template <typename T>
std::vector<TensorSpec> Linear<T>::parameters() const {
  return {{"weight", {this->outputs(), this->inputs()}}, {"bias", {this->outputs()}}};
}

template <typename T>
void Linear<T>::bind(const LayerMemory<T>& memory) {
  const Index weights = this->outputs() * this->inputs();
  weight_ = memory.parameters;
  bias_ = memory.parameters + weights;
  weight_grad_ = memory.gradients;
}

template <typename T>
void Linear<T>::initialize(Rng& rng) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(this->inputs()));
  const Index count = this->outputs() * this->inputs() + this->outputs();
  for (Index i = 0; i < count; ++i) weight_[i] = static_cast<T>(rng.uniform(-bound, bound));
}

template <typename T>
void Linear<T>::forward(const PassContext&, ConstMatrixView<T> x, MatrixView<T> y) {
  ConstMatrixView<T> wt(weight_, this->inputs(), this->outputs());
  VectorView<T> b(bias_, this->outputs());
  // y = W x + b, written as (W^T)^T x so Eigen's GEMM reads the weights in place. The bias
  // goes in first and the product is added to it: "=" would zero y and then add anyway, so
  // the bias costs no pass of its own.
  y.colwise() = b;
  multiply(y, wt, Op::kTranspose, x, Op::kNone, Accumulate::kAdd);
}

template <typename T>
void Linear<T>::parameter_gradients(ConstMatrixView<T> x, ConstMatrixView<T> dy, T* gradients,
                                    Accumulate mode) {
  MatrixView<T> dwt(gradients, this->inputs(), this->outputs());
  VectorView<T> db(gradients + this->inputs() * this->outputs(), this->outputs());
  multiply(dwt, x, Op::kNone, dy, Op::kTranspose, mode);  // dW^T (+)= x dy^T: (F, B)(B, O)
  // db = the row sums of dy, added column after column: each sum in column order whatever
  // the vector width. Eigen's dy.rowwise().sum() splits the rows between vector code and
  // scalar code (which add in other orders) by the address of db, so the same chunk's bias
  // gradient came out otherwise in a term at another offset (tests/nn/chunked_pass_test.cpp).
  if (mode == Accumulate::kOverwrite) db.setZero();
  for (Index s = 0; s < dy.cols(); ++s) db += dy.col(s);
}

namespace {

// The largest |v| of a view, or infinity when some v is not finite: a bound must see a NaN.
template <typename T>
double largest_magnitude(ConstMatrixView<T> values) {
  if (!values.allFinite()) return std::numeric_limits<double>::infinity();
  return values.size() == 0 ? 0.0 : static_cast<double>(values.cwiseAbs().maxCoeff());
}

// About a quarter of a core's L2 for a block of the weight gradient (F rows, a multiple of 4
// columns): the block and its int64 sums stay in cache while every chunk is added to them.
constexpr size_t kGridBlockBytes = 256 * 1024;

}  // namespace

template <typename T>
void Linear<T>::parameter_gradients_onto_grid(const PassContext& context, ConstMatrixView<T> x,
                                              ConstMatrixView<T> dy) {
  GradientGrid& grid = *context.gradient_grid;
  const Index f = this->inputs(), o = this->outputs(), chunk = context.chunk_columns;
  const Index chunks = x.cols() / chunk;
  // A chunk's gradient of weight (o, f) sums `chunk` products x[f, s] dy[o, s], each at most
  // max|x| max|dy|, and float rounding adds less than chunk * eps of that: twice the sum
  // bounds every chunk's value with room to spare. The maxima are every rank's (collective).
  double maxima[2] = {largest_magnitude(x), largest_magnitude(dy)};
  grid.max_over_ranks(maxima, 2);
  const double per_chunk = 2.0 * static_cast<double>(chunk);
  const GradientGrid::Tensor weights = grid.tensor(weight_grad_, per_chunk * maxima[0] * maxima[1]);
  const GradientGrid::Tensor bias = grid.tensor(weight_grad_ + f * o, per_chunk * maxima[1]);
  // Blocks of `width` outputs: dW^T[:, block] = x_t dy_t[block, :]^T for each chunk t, each
  // product of the same shape at every N, then onto the grid while the block is in cache.
  const Index width = std::clamp<Index>(
      static_cast<Index>(kGridBlockBytes / (static_cast<size_t>(f) * sizeof(T))) / 4 * 4, 4, o);
  T* block = static_cast<T*>(grid.scratch(
      scratch_values_bytes<T>(f * width) + scratch_values_bytes<T>(width * chunk) + scratch_values_bytes<T>(o)));
  T* dy_block = block + scratch_values_bytes<T>(f * width) / sizeof(T);
  T* bias_sum = dy_block + scratch_values_bytes<T>(width * chunk) / sizeof(T);
  for (Index first = 0; first < o; first += width) {
    const Index n = std::min(width, o - first);
    for (Index t = 0; t < chunks; ++t) {
      MatrixView<T> rows(dy_block, n, chunk);  // dy_t[block, :], contiguous for the product
      rows = dy.block(first, t * chunk, n, chunk);
      multiply(MatrixView<T>(block, f, n), ConstMatrixView<T>(x.data() + t * chunk * f, f, chunk),
               Op::kNone, ConstMatrixView<T>(dy_block, n, chunk), Op::kTranspose, Accumulate::kOverwrite);
      grid.add(block, static_cast<size_t>(f * n), weights, static_cast<size_t>(first * f));
    }
  }
  VectorView<T> db(bias_sum, o);
  for (Index t = 0; t < chunks; ++t) {
    db.setZero();  // the bias gradient as parameter_gradients adds it, column after column
    for (Index s = t * chunk; s < (t + 1) * chunk; ++s) db += dy.col(s);
    grid.add(bias_sum, static_cast<size_t>(o), bias, 0);
  }
}

template <typename T>
void Linear<T>::backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T>,
                         ConstMatrixView<T> dy, MatrixView<T>* dx) {
  if (context.chunk_columns == 0)
    parameter_gradients(x, dy, weight_grad_, Accumulate::kAdd);
  else
    parameter_gradients_onto_grid(context, x, dy);
  if (dx) {
    ConstMatrixView<T> wt(weight_, this->inputs(), this->outputs());
    multiply(*dx, wt, Op::kNone, dy, Op::kNone, Accumulate::kOverwrite);  // dx = W^T dy: (F, O)(O, B)
  }
}

template <typename T>
void Linear<T>::gemm_calls(Index batch, std::vector<GemmCall>& calls) const {
  const Index f = this->inputs(), o = this->outputs();
  calls.push_back({{o, batch, f, Op::kTranspose, Op::kNone}});  // forward
  calls.push_back({{f, o, batch, Op::kNone, Op::kTranspose}});  // weight gradient
  calls.push_back({{f, batch, o, Op::kNone, Op::kNone}});       // input gradient
}

template class Linear<float>;
template class Linear<double>;

}  // namespace mpiddp::nn
