#pragma once
// The precision of the float32 matrix products (config key compute.precision; docs/precision.md).
// Only the products change: parameters, gradients, the reduction, the optimizer and every
// statistic (LayerNorm's, softmax's, BatchNorm's, the loss) stay float32 whatever is chosen.
//
//   float32         the products as they always were
//   bf16            operands rounded to bfloat16, products accumulated in float32 by a library's
//                   bf16 kernel (oneDNN's matmul on vdpbf16ps), attention's tiles by our own on
//                   the same instruction: needs AVX512_BF16 and oneDNN
//   bf16_reference  the same rounding of the operands, then the float32 product of compute.gemm:
//                   any CPU. It reproduces a bf16 run's rounding on a machine without bf16, and
//                   it is what the fast path is tested against (tests/kernels/precision_test.cpp).
//
// The choice is the process's, set once before the first product as compute.gemm's library is
// (kernels/gemm.hpp), and read by kernels::multiply and kernels::multiply_tile: layers never see it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"

namespace mpiddp::kernels {

enum class Precision { kFloat32, kBf16, kBf16Reference };

// "float32", "bf16", "bf16_reference": the names compute.precision takes.
const char* precision_name(Precision precision);
std::vector<std::string> precision_names();
bool find_precision(const std::string& name, Precision* precision);

// What this process lacks for the fast bf16 products, e.g. "avx512_bf16" (the CPU, or
// compute.isa's cap below it) or "oneDNN" (not built in); empty when it has everything.
std::string bf16_products_lack();

// Every float product of this process from now on is computed in `precision`. The caller has
// checked that bf16_products_lack() is empty before choosing kBf16.
void use_precision(Precision precision);
Precision precision_in_use();

// out[i] = from_bf16(to_bf16(in[i])): each value rounded to the nearest bfloat16 (ties to
// even) and kept as the float32 it is exactly. in: (n) -> out: (n); in == out is allowed.
void round_to_bf16(const float* in, float* out, size_t n);
// round_to_bf16 of a strided (rows, cols) view into a dense one: in column j starts at
// in + j stride, out's at out + j rows.
void round_columns_to_bf16(const float* in, Index rows, Index cols, Index stride, float* out);
// out[i] = to_bf16(in[i]), the bfloat16's 16 bits: in: (n) -> out: (n).
void convert_to_bf16(const float* in, uint16_t* out, size_t n);

}  // namespace mpiddp::kernels
