#include "mpiddp/nn/attention.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/kernels/attention_naive.hpp"
#include "mpiddp/kernels/attention_tiled.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/kernels/row_sums.hpp"

namespace mpiddp::nn {

AttentionOptions AttentionOptions::parse(io::JsonSection& section) {
  if (!section.has("heads")) throw ConfigError(section.key_path("heads"), "required key is missing");
  AttentionOptions options;
  options.heads = section.integer("heads", 0, 1, 1 << 16);
  options.causal = section.boolean("causal", true);
  options.bias = section.boolean("bias", true);
  options.dropout = section.number("dropout", 0.0, 0.0, 1.0);
  if (options.dropout >= 1.0)
    throw ConfigError(section.key_path("dropout"), "expected a drop probability in [0, 1), got 1");
  options.init = InitStd::parse(section);
  // Read only when given, so that configs written before it resolve (and hash) as before.
  if (section.has("algorithm")) options.algorithm = section.choice("algorithm", "auto", {"auto", "naive", "tiled"});
  return options;
}

AttentionAlgorithm attention_algorithm(const std::string& configured, Index positions) {
  if (configured == "naive") return AttentionAlgorithm::kNaive;
  if (configured == "tiled") return AttentionAlgorithm::kTiled;
  return positions >= kTiledAttentionFrom ? AttentionAlgorithm::kTiled : AttentionAlgorithm::kNaive;
}

namespace {

const Shape& attention_input(const AttentionOptions& options, const Shape& input, const std::string& key) {
  if (input.size() != 2)
    throw ConfigError(key, "attention takes a sequence (T, C) but gets " + shape_text(input));
  if (options.dropout > 0.0 && options.heads * input[0] * input[0] > DropoutStream::kMaxValues)
    throw ConfigError(key, "attention over " + shape_text(input) + " with " + std::to_string(options.heads) +
                               " heads: more than 2^34 probabilities per sample do not fit dropout's counter");
  if (input[1] % options.heads != 0)
    throw ConfigError(key + ".heads", std::to_string(options.heads) + " heads do not divide the width " +
                                          std::to_string(input[1]));
  return input;
}

}  // namespace

template <typename T>
Attention<T>::Attention(const AttentionOptions& options, const Shape& input, const std::string& key)
    : Layer<T>(attention_input(options, input, key), input),
      t_(input[0]),
      c_(input[1]),
      heads_(options.heads),
      d_(input[1] / options.heads),
      causal_(options.causal),
      bias_(options.bias),
      dropout_(options.dropout),
      init_(options.init),
      salt_(fnv1a(key)),
      key_(key),
      head_{t_, d_, causal_},
      kernel_(attention_algorithm(options.algorithm, t_) == AttentionAlgorithm::kTiled ? kernels::tiled_attention<T>()
                                                                                      : kernels::naive_attention<T>()) {}

template <typename T>
std::string Attention<T>::describe() const {
  return "attention" + std::to_string(heads_) + "h" + (causal_ ? "" : "full") + (bias_ ? "" : "nobias");
}

template <typename T>
std::vector<TensorSpec> Attention<T>::parameters() const {
  std::vector<TensorSpec> specs = {{"c_attn.weight", {3 * c_, c_}}};
  if (bias_) specs.push_back({"c_attn.bias", {3 * c_}});
  specs.push_back({"c_proj.weight", {c_, c_}});
  if (bias_) specs.push_back({"c_proj.bias", {c_}});
  return specs;
}

template <typename T>
size_t Attention<T>::scratch_bytes(Index max_batch) const {
  const Index n = max_batch * t_;
  return 2 * scratch_values_bytes<T>(3 * c_ * n) + 2 * scratch_values_bytes<T>(c_ * n) +
         scratch_values_bytes<T>(static_cast<Index>(kernel_.kept_values(head_)) * heads_ * max_batch) +
         static_cast<size_t>(workers(max_batch)) * kernel_.workspace_bytes(head_, dropout_ > 0.0);
}

template <typename T>
int Attention<T>::workers(Index max_batch) const {
  return static_cast<int>(std::min<Index>(affinity_cores(), std::max<Index>(1, heads_ * max_batch)));
}

template <typename T>
StridedView<T> Attention<T>::head_of_qkv(T* qkv, Index b, Index h, Index part) const {
  return {qkv + b * t_ * 3 * c_ + part * c_ + h * d_, d_, t_, Eigen::OuterStride<>(3 * c_)};
}

template <typename T>
StridedView<T> Attention<T>::head_of_out(T* heads_out, Index b, Index h) const {
  return {heads_out + b * t_ * c_ + h * d_, d_, t_, Eigen::OuterStride<>(c_)};
}

template <typename T>
void Attention<T>::HeadDropout::fill(const void* source, Index query, Index first, Index count, T* mask) {
  const HeadDropout& d = *static_cast<const HeadDropout*>(source);
  d.stream->fill(mask, d.first + query * d.t + first, count, d.position, d.p, d.scale);
}

template <typename T>
template <typename HeadPass>
void Attention<T>::for_each_head(Index batch, const HeadPass& pass) const {
  const Index pairs = batch * heads_;
  const int team = static_cast<int>(std::min<Index>({threads_in_use(), workers_, pairs}));
  if (team <= 1) {
    for (Index pair = 0; pair < pairs; ++pair) pass(pair / heads_, pair % heads_, 0);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for num_threads(team) schedule(static)
  for (Index pair = 0; pair < pairs; ++pair) pass(pair / heads_, pair % heads_, omp_get_thread_num());
#endif
}

template <typename T>
double Attention<T>::multiply_adds_per_sample() const {
  const double t = static_cast<double>(t_), c = static_cast<double>(c_);
  return 4.0 * t * c * c + 2.0 * t * t * c;  // the two projections, then q k^T and p v
}

template <typename T>
void Attention<T>::gemm_calls(Index batch, std::vector<kernels::GemmCall>& calls) const {
  const Index n = batch * t_;
  using kernels::GemmRole;
  using kernels::Op;
  for (const Index out : {3 * c_, c_}) {
    calls.push_back({{out, n, c_, Op::kTranspose, Op::kNone}, 1, GemmRole::kForward});
    calls.push_back({{c_, out, n, Op::kNone, Op::kTranspose}, 1, GemmRole::kWeightGradient});
    calls.push_back({{c_, n, out, Op::kNone, Op::kNone}, 1, GemmRole::kInputGradient});
  }
}

template <typename T>
void Attention<T>::bind(const LayerMemory<T>& memory) {
  T* p = memory.parameters;
  T* g = memory.gradients;
  auto take = [&](T*& value, T*& gradient, Index count) {
    value = p;
    gradient = g;
    p += count;
    g += count;
  };
  take(attn_weight_, attn_weight_grad_, 3 * c_ * c_);
  if (bias_) take(attn_bias_, attn_bias_grad_, 3 * c_);
  take(proj_weight_, proj_weight_grad_, c_ * c_);
  if (bias_) take(proj_bias_, proj_bias_grad_, c_);
  const Index n = memory.max_batch * t_;
  std::byte* scratch = memory.scratch;
  qkv_ = take_scratch_values<T>(scratch, 3 * c_ * n);
  heads_out_ = take_scratch_values<T>(scratch, c_ * n);
  d_qkv_ = take_scratch_values<T>(scratch, 3 * c_ * n);
  d_heads_out_ = take_scratch_values<T>(scratch, c_ * n);
  kept_ = take_scratch_values<T>(scratch, static_cast<Index>(kernel_.kept_values(head_)) * heads_ * memory.max_batch);
  workers_ = workers(memory.max_batch);
  workspaces_ = scratch;
}

template <typename T>
void Attention<T>::initialize(Rng& rng) {
  // In parameters()' order, as nn.Linear's c_attn and then c_proj draw them.
  const double bound = 1.0 / std::sqrt(static_cast<double>(c_));
  initialize_weights(attn_weight_, 3 * c_ * c_, init_, bound, rng);
  if (bias_) initialize_bias(attn_bias_, 3 * c_, init_, bound, rng);
  initialize_weights(proj_weight_, c_ * c_, init_, bound, rng);
  if (bias_) initialize_bias(proj_bias_, c_, init_, bound, rng);
}

template <typename T>
std::optional<DropoutStream> Attention<T>::dropout_stream(const PassContext& context) const {
  if (!context.training || dropout_ == 0.0) return std::nullopt;
  return DropoutStream(context, salt_, key_);
}

template <typename T>
void Attention<T>::forward(const PassContext& context, ConstMatrixView<T> x, MatrixView<T> y) {
  const Index n = x.cols() * t_;
  const ConstMatrixView<T> xs(x.data(), c_, n);
  MatrixView<T> qkv(qkv_, 3 * c_, n);
  if (bias_) qkv.colwise() = VectorView<T>(attn_bias_, 3 * c_);
  else qkv.setZero();
  kernels::multiply(qkv, attn_weight_copy_.make(ConstMatrixView<T>(attn_weight_, c_, 3 * c_)), kernels::Op::kTranspose,
                    {xs}, kernels::Op::kNone, kernels::Accumulate::kAdd);
  const std::optional<DropoutStream> dropout = dropout_stream(context);
  for_each_head(x.cols(), [&](Index b, Index h, int worker) {
    const HeadDropout source = head_dropout(dropout, context, b, h);
    const kernels::AttentionMask<T> mask{&HeadDropout::fill, &source};
    kernel_.forward(head_of_out(heads_out_, b, h), kept(b, h), qkv_head(b, h, 0), qkv_head(b, h, 1), qkv_head(b, h, 2),
                    head_, dropout ? &mask : nullptr, workspace(worker));
  });
  MatrixView<T> ys(y.data(), c_, n);
  if (bias_) ys.colwise() = VectorView<T>(proj_bias_, c_);
  else ys.setZero();
  kernels::multiply(ys, proj_weight_copy_.make(ConstMatrixView<T>(proj_weight_, c_, c_)), kernels::Op::kTranspose,
                    {ConstMatrixView<T>(heads_out_, c_, n)}, kernels::Op::kNone, kernels::Accumulate::kAdd);
}

template <typename T>
void Attention<T>::backward(const PassContext& context, ConstMatrixView<T> x, ConstMatrixView<T>, ConstMatrixView<T> dy,
                            MatrixView<T>* dx) {
  const Index n = x.cols() * t_;
  const ConstMatrixView<T> xs(x.data(), c_, n), dys(dy.data(), c_, n);
  const ConstMatrixView<T> heads_out(heads_out_, c_, n);
  // c_proj, as Linear: dW^T += heads_out dy^T, db += row sums of dy, d heads_out = W^T dy.
  // Each output gradient is converted once for its two products, the weights' copies are
  // forward's (Note [operands converted once] in kernels/gemm.hpp).
  thread_local kernels::OperandCopy<T> output_gradient_copy;
  const kernels::Operand<T> dy_operand = output_gradient_copy.make(dys);
  MatrixView<T> d_proj(proj_weight_grad_, c_, c_);
  kernels::multiply(d_proj, {heads_out}, kernels::Op::kNone, dy_operand, kernels::Op::kTranspose,
                    kernels::Accumulate::kAdd);
  if (bias_) kernels::add_row_sums(dys, 0, n, VectorView<T>(proj_bias_grad_, c_));
  MatrixView<T> d_heads_out(d_heads_out_, c_, n);
  kernels::multiply(d_heads_out, proj_weight_copy_.reuse(ConstMatrixView<T>(proj_weight_, c_, c_)), kernels::Op::kNone,
                    dy_operand, kernels::Op::kNone, kernels::Accumulate::kOverwrite);
  const std::optional<DropoutStream> dropout = dropout_stream(context);
  for_each_head(x.cols(), [&](Index b, Index h, int worker) {
    const HeadDropout source = head_dropout(dropout, context, b, h);
    const kernels::AttentionMask<T> mask{&HeadDropout::fill, &source};
    kernel_.backward(head_of_qkv(d_qkv_, b, h, 0), head_of_qkv(d_qkv_, b, h, 1), head_of_qkv(d_qkv_, b, h, 2),
                     read_only(head_of_out(d_heads_out_, b, h)), read_only(head_of_out(heads_out_, b, h)),
                     qkv_head(b, h, 0), qkv_head(b, h, 1), qkv_head(b, h, 2), kept(b, h), head_,
                     dropout ? &mask : nullptr, workspace(worker));
  });
  // c_attn, the same with the (3C) gradient of q, k and v.
  const ConstMatrixView<T> d_qkv(d_qkv_, 3 * c_, n);
  const kernels::Operand<T> d_qkv_operand = output_gradient_copy.make(d_qkv);  // dy's copy is done with
  MatrixView<T> d_attn(attn_weight_grad_, c_, 3 * c_);
  kernels::multiply(d_attn, {xs}, kernels::Op::kNone, d_qkv_operand, kernels::Op::kTranspose,
                    kernels::Accumulate::kAdd);
  if (bias_) kernels::add_row_sums(d_qkv, 0, n, VectorView<T>(attn_bias_grad_, 3 * c_));
  if (dx) {
    MatrixView<T> dxs(dx->data(), c_, n);
    kernels::multiply(dxs, attn_weight_copy_.reuse(ConstMatrixView<T>(attn_weight_, c_, 3 * c_)), kernels::Op::kNone,
                      d_qkv_operand, kernels::Op::kNone, kernels::Accumulate::kOverwrite);
  }
}

template class Attention<float>;
template class Attention<double>;

}  // namespace mpiddp::nn
