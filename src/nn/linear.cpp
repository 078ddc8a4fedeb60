#include "mpiddp/nn/linear.hpp"

#include <cmath>

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

template <typename T>
void Linear<T>::backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T>,
                         ConstMatrixView<T> dy, MatrixView<T>* dx) {
  const Index chunk = context.chunk_columns;
  if (chunk == 0) {
    parameter_gradients(x, dy, weight_grad_, Accumulate::kAdd);
  } else {
    // Each chunk's own product, of the same views as a pass over that chunk alone: the
    // same bits as the chunk-by-chunk step, whose terms start at zero (an overwrite is an
    // addition to zero; only a zero's sign could differ, and the fixed-point sum drops it).
    for (Index first = 0, t = 0; first < x.cols(); first += chunk, ++t)
      parameter_gradients(ConstMatrixView<T>(x.data() + first * x.rows(), x.rows(), chunk),
                          ConstMatrixView<T>(dy.data() + first * dy.rows(), dy.rows(), chunk),
                          weight_grad_ + t * context.chunk_gradient_stride, Accumulate::kOverwrite);
  }
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
