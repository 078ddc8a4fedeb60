#include "mpiddp/nn/linear.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "mpiddp/core/error.hpp"
#include "mpiddp/kernels/gemm.hpp"
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
    const std::vector<ParameterTensor>& tensors = *memory.model_tensors;
    for (size_t t = 0; t < tensors.size(); ++t)
      if (tensors[t].name == tied_to_) {
        weight_ = (*memory.tensor_parameters)[t];
        weight_grad_ = (*memory.tensor_gradients)[t];
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
  kernels::multiply_in_pieces(ys, weight_copy_.make(wt), kernels::Op::kTranspose, {by_position(x)},
                              kernels::Accumulate::kAdd, context.forward_columns());
}

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
void Linear<T>::backward(const PassContext& context, ConstMatrixView<T> x_samples, ConstMatrixView<T>,
                         ConstMatrixView<T> dy_samples, MatrixView<T>* dx) {
  const ConstMatrixView<T> x = by_position(x_samples), dy = by_position(dy_samples);
  // dy converted once for both products (Note [operands converted once] in kernels/gemm.hpp).
  thread_local kernels::OperandCopy<T> output_gradient_copy;
  const kernels::Operand<T> dy_operand = output_gradient_copy.make(dy);
  if (context.parameter_gradients) {
    context.parameter_gradients->add_linear(x, dy, weight_grad_, bias_grad_);
  } else {
    MatrixView<T> dwt(weight_grad_, in_, out_);
    // dW^T (+)= x dy^T: (F, B)(B, O), written on a step's first micro-batch (Note [gradients
    // written, not cleared] in sequential.cpp); a tied W's is added to its owner's, always.
    const bool overwrite_weight = context.overwrite_gradients && tied_to_.empty();
    kernels::multiply(dwt, {x}, kernels::Op::kNone, dy_operand, kernels::Op::kTranspose,
                      overwrite_weight ? kernels::Accumulate::kOverwrite : kernels::Accumulate::kAdd);
    if (bias_grad_) {
      VectorView<T> db(bias_grad_, out_);
      if (context.overwrite_gradients) db.setZero();  // O values: the row sums' order stays as it was
      kernels::add_row_sums(dy, 0, dy.cols(), db);
    }
  }
  if (dx) {
    ConstMatrixView<T> wt(weight_, in_, out_);
    // dx = W^T dy: (F, O)(O, B)
    MatrixView<T> dxs = by_position(*dx);
    // The weights' copy made in forward: they have not changed since.
    kernels::multiply_in_pieces(dxs, weight_copy_.reuse(wt), kernels::Op::kNone, dy_operand,
                                kernels::Accumulate::kOverwrite, context.input_gradient_columns());
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
