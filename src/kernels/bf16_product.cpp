// compute.precision (kernels/precision.hpp): the choice, the rounding of operands to bfloat16,
// and the float products in bf16, fast (a library's bf16 kernel) or reference (rounded
// operands, then compute.gemm's float32 product).
#include <algorithm>
#include <atomic>
#include <bit>
#include <type_traits>
#include <vector>

#include "gemm_backends/gemm_kernels.hpp"
#include "mpiddp/core/bf16.hpp"
#include "mpiddp/kernels/isa.hpp"
#include "mpiddp/kernels/precision.hpp"
#include "targets.hpp"

namespace mpiddp::kernels {
namespace {

std::atomic<Precision> precision_chosen{Precision::kFloat32};

constexpr Precision kAllPrecisions[] = {Precision::kFloat32, Precision::kBf16, Precision::kBf16Reference};

// to_bf16 (core/bf16.hpp) without its branch, so that it vectorises: the same 16 bits for
// every input, NaNs included (tests/kernels/precision_test.cpp checks every bf16 with the
// lower halves that decide the rounding). The hardware's vcvtneps2bf16 is not used: it flushes
// subnormal inputs to zero, and the fast and reference paths must round their operands alike.
MPIDDP_ALWAYS_INLINE uint32_t rounded_bits(uint32_t bits) {
  const uint32_t lsb = (bits >> 16) & 1u;
  const uint32_t rounded = (bits + 0x7fffu + lsb) & 0xffff0000u;
  const uint32_t quiet_nan = (bits | 0x00400000u) & 0xffff0000u;
  return (bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded;
}

template <typename T>
MPIDDP_ALWAYS_INLINE void round_body(const T* in, T* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = std::bit_cast<T>(rounded_bits(std::bit_cast<uint32_t>(in[i])));
}

template <typename T>
MPIDDP_ALWAYS_INLINE void convert_body(const T* in, uint16_t* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint16_t>(rounded_bits(std::bit_cast<uint32_t>(in[i])) >> 16);
}

// round_body over the columns of a strided (rows, cols) view, into a dense one: one call per
// tile, where a call per column (an attention head's D values) cost as much as its rounding.
template <typename T>
MPIDDP_ALWAYS_INLINE void round_columns_body(const T* in, Index rows, Index cols, Index stride, T* out) {
  for (Index column = 0; column < cols; ++column)
    round_body(in + column * stride, out + column * rows, static_cast<size_t>(rows));
}

MPIDDP_VARIANTS_OF(round_columns, round_columns_body, void, (const T* in, Index rows, Index cols, Index stride, T* out),
                   (in, rows, cols, stride, out))
MPIDDP_VARIANTS_OF(convert_values, convert_body, void, (const T* in, uint16_t* out, size_t n), (in, out, n))

// The operands' rounded copies are kept per thread (attention's heads multiply on several
// threads); they grow to the largest operand of the first step and are reused from then on.
template <typename V>
V* grown_to(std::vector<V>& buffer, Index count) {
  if (buffer.size() < static_cast<size_t>(count)) buffer.resize(static_cast<size_t>(count));
  return buffer.data();
}

// values' bf16 bits, in `buffer` (grown_to their count).
const uint16_t* convert_into(std::vector<uint16_t>& buffer, const ConstMatrixView<float>& values) {
  uint16_t* bits = grown_to(buffer, values.size());
  convert_to_bf16(values.data(), bits, static_cast<size_t>(values.size()));
  return bits;
}

}  // namespace

const char* precision_name(Precision precision) {
  switch (precision) {
    case Precision::kFloat32: return "float32";
    case Precision::kBf16: return "bf16";
    case Precision::kBf16Reference: return "bf16_reference";
  }
  return "?";
}

std::vector<std::string> precision_names() {
  std::vector<std::string> names;
  for (Precision p : kAllPrecisions) names.push_back(precision_name(p));
  return names;
}

bool find_precision(const std::string& name, Precision* precision) {
  for (Precision p : kAllPrecisions)
    if (name == precision_name(p)) {
      *precision = p;
      return true;
    }
  return false;
}

std::string bf16_products_lack() {
  if (!gemm_detail::bf16_kernels()) return "oneDNN (not built into this mpiddp)";
  if (static_cast<int>(active_isa()) >= static_cast<int>(Isa::kAvx512Bf16)) return "";
  const std::string lacking = cpu_lacks(Isa::kAvx512Bf16);
  return lacking.empty() ? "avx512_bf16 (compute.isa caps the kernels at " + std::string(isa_name(active_isa())) + ")"
                         : lacking;
}

void use_precision(Precision precision) { precision_chosen.store(precision, std::memory_order_relaxed); }
Precision precision_in_use() { return precision_chosen.load(std::memory_order_relaxed); }

void round_columns_to_bf16(const float* in, Index rows, Index cols, Index stride, float* out) {
  using Kernel = void (*)(const float*, Index, Index, Index, float*);
  static const Dispatched<Kernel> variants(
      {round_columns_portable<float>, round_columns_avx2<float>, round_columns_avx512<float>, nullptr, nullptr});
  variants()(in, rows, cols, stride, out);
}

// One column of n values: the same kernel, the same bits.
void round_to_bf16(const float* in, float* out, size_t n) {
  const auto count = static_cast<Index>(n);
  round_columns_to_bf16(in, count, 1, count, out);
}

ConstMatrixView<float> gemm_detail::bf16_rounded_copy(const float* in, Index rows, Index cols, Index stride,
                                                      std::vector<float>& buffer) {
  float* copy = grown_to(buffer, rows * cols);
  round_columns_to_bf16(in, rows, cols, stride, copy);
  return ConstMatrixView<float>(copy, rows, cols);
}

void convert_to_bf16(const float* in, uint16_t* out, size_t n) {
  using Kernel = void (*)(const float*, uint16_t*, size_t);
  static const Dispatched<Kernel> variants(
      {convert_values_portable<float>, convert_values_avx2<float>, convert_values_avx512<float>, nullptr, nullptr});
  variants()(in, out, n);
}

// Note [bf16 products]
// Both paths round each operand's elements to bfloat16 the same way (to nearest, ties to even)
// before the product, so they compute sums of the same exact products (a product of two bf16
// is exact in float32: 8 + 8 significant bits) and differ only in the order and the rounding
// of the float32 accumulation: |fast - reference| <= 2 gamma_k sum |a_i b_i|, gamma_k = k u / (1 - k u),
// u = 2^-24, the bound tests/kernels/precision_test.cpp checks. Every operand is rounded for
// its product, weights included, as autocast does: the master weights stay float32. (An operand
// that several products read may be rounded once for all: Note [operands converted once].)
void gemm_detail::multiply_in_precision(MatrixView<float> c, const Operand<float>& a_operand, Op op_a,
                                        const Operand<float>& b_operand, Op op_b, Accumulate mode) {
  const ConstMatrixView<float>& a = a_operand.values;
  const ConstMatrixView<float>& b = b_operand.values;
  const Index k = op_a == Op::kTranspose ? a.rows() : a.cols();
  // An empty product is a no-op or a zero fill, whatever the precision.
  if (c.size() == 0 || k == 0) return multiply_float32(c, a, op_a, b, op_b, mode);
  if (precision_in_use() == Precision::kBf16Reference) {
    thread_local std::vector<float> rounded_a, rounded_b;
    return multiply_float32(c, bf16_rounded_copy(a.data(), a.rows(), a.cols(), a.rows(), rounded_a), op_a,
                            bf16_rounded_copy(b.data(), b.rows(), b.cols(), b.rows(), rounded_b), op_b, mode);
  }
  thread_local std::vector<uint16_t> bits_a, bits_b;
  const uint16_t* a16 = a_operand.bf16 ? a_operand.bf16 : convert_into(bits_a, a);
  const uint16_t* b16 = b_operand.bf16 ? b_operand.bf16 : convert_into(bits_b, b);
  const GemmKernels* library = bf16_kernels();
  use_product_threads(static_cast<double>(c.rows()) * static_cast<double>(c.cols()) * static_cast<double>(k), library);
  library->bf16gemm(op_a, op_b, c.rows(), c.cols(), k, a16, a.rows(), b16, b.rows(),
                    mode == Accumulate::kAdd ? 1.0f : 0.0f, c.data(), c.rows());
}

namespace {
// What OperandCopy converts: float matrices under "bf16" (the only products that read bits).
template <typename T>
bool converts_operands() {
  return std::is_same_v<T, float> && precision_in_use() == Precision::kBf16;
}
}  // namespace

template <typename T>
Operand<T> OperandCopy<T>::make(ConstMatrixView<T> values) {
  made_from_ = values.data();
  rows_ = values.rows();
  cols_ = values.cols();
  holds_bits_ = converts_operands<T>();
  if constexpr (std::is_same_v<T, float>)
    if (holds_bits_) convert_into(bits_, values);
  return Operand<T>{values, holds_bits_ ? bits_.data() : nullptr};
}

template <typename T>
Operand<T> OperandCopy<T>::reuse(ConstMatrixView<T> values) {
  const bool same_matrix = made_from_ == values.data() && rows_ == values.rows() && cols_ == values.cols();
  if (!same_matrix || holds_bits_ != converts_operands<T>()) return make(values);
  return Operand<T>{values, holds_bits_ ? bits_.data() : nullptr};
}

template class OperandCopy<float>;
template class OperandCopy<double>;

}  // namespace mpiddp::kernels
