#pragma once
// The matrix product under every layer (linear, conv2d), computed by the library the machine
// runs fastest: Eigen, OpenBLAS, BLIS or oneDNN (config key compute.gemm; docs/config.md, docs/benchmarks.md).
// Eigen stays for everything elementwise. No single library wins everywhere: on Zen 3
// (AVX2) OpenBLAS beat Eigen by 1.3-1.7x on our shapes, on AVX-512 machines they were close,
// so `auto` measures the model's own shapes (kernels/gemm_calibration.hpp) instead of assuming.
//
// Every rank must use the same library: two libraries round differently, and the replicas
// must stay bit-identical. The trainer decides once, on rank 0, and tells the others.
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/core/types.hpp"

namespace mpiddp::kernels {

enum class GemmBackend { kEigen, kOpenBlas, kBlis, kOneDnn };

// "eigen", "openblas", "blis", "onednn": the names compute.gemm takes.
const char* gemm_backend_name(GemmBackend backend);
// Every backend's name, built in or not, in preference order.
std::vector<std::string> gemm_backend_names();
// The backends built into this binary (Eigen always; the others when CMake found them).
std::vector<GemmBackend> available_gemm_backends();
// The backend of that name among the available ones; false when unknown or not built.
bool find_gemm_backend(const std::string& name, GemmBackend* backend);
// Where the backend's code comes from, e.g. "libopenblas.so.0 (pthreads)": the shared
// library its entry point resolved to, so a run record shows what really computed.
std::string gemm_backend_library(GemmBackend backend);

// Makes `backend` compute every gemm of this process, with `threads` threads inside the
// library. OpenBLAS's pthread pool and BLIS keep their own counts, apart from OpenMP's:
// all of them are set here, so one thread per rank means one thread inside every library.
void use_gemm_backend(GemmBackend backend, int threads);
GemmBackend gemm_backend_in_use();
// From now on a product of fewer than `multiply_adds` multiply-adds (m n k) runs on one
// thread, and the others on use_gemm_backend's count (Note [threads per product] in
// kernels/gemm.cpp). 0, the default: every product on that count.
void use_one_thread_below(double multiply_adds);
double one_thread_limit();  // the last use_one_thread_below's

enum class Op { kNone, kTranspose };
enum class Accumulate { kOverwrite, kAdd };

// c = op(a) op(b), or c += op(a) op(b). Views are column-major (core/types.hpp); op(a) is
// (m, k), op(b) (k, n), c (m, n). Float and double; oneDNN has no double product, so double
// goes to Eigen under it.
template <typename T>
void multiply(MatrixView<T> c, ConstMatrixView<T> a, Op op_a, ConstMatrixView<T> b, Op op_b,
              Accumulate mode);

// A product's operand: a matrix, and perhaps its copy already in the form compute.precision's
// products read (OperandCopy below), which they then read instead of converting the matrix.
template <typename T>
struct Operand {
  ConstMatrixView<T> values;
  const uint16_t* bf16 = nullptr;  // values' bf16 bits, column-major as values; null: converted at the product
};

// Note [operands converted once]
// Under compute.precision "bf16" every product converts both operands to bf16 bits, a pass over
// memory each: a layer's weights were converted in its forward and again in its backward, and
// the output gradient once for each of backward's two products (about 8 % of a gpt2s step on a
// Zen 5). A layer keeps an OperandCopy of its weights, made in forward and reused in backward,
// and converts dy once for both products: the same bits reach the same products. PyTorch's
// autocast keeps a cast copy of each weight for the same reason. Under float32, bf16_reference
// and for double nothing is copied and the products do what they do without it.
template <typename T>
class OperandCopy {
 public:
  // values' operand: under "bf16", with its bits converted now into this copy's buffer (grown to
  // the largest matrix it was made from, then reused); else the matrix alone. The operand's bits
  // are valid until this copy's next make(), which may move the buffer.
  Operand<T> make(ConstMatrixView<T> values);
  // The last make()'s operand when it was made from this same matrix (address and shape) and in
  // the precision in use, else make(values). The caller knows the values have not changed since
  // (a layer's weights between its forward and its backward).
  Operand<T> reuse(ConstMatrixView<T> values);

 private:
  std::vector<uint16_t> bits_;
  const T* made_from_ = nullptr;  // the last make()'s matrix, and whether bits_ hold it
  Index rows_ = 0, cols_ = 0;
  bool holds_bits_ = false;
};

// multiply() of operands (Note [operands converted once]): the same products, the same bits.
template <typename T>
void multiply(MatrixView<T> c, const Operand<T>& a, Op op_a, const Operand<T>& b, Op op_b, Accumulate mode);

// multiply() with op_b kNone, cut into products of at most `piece` columns of c and b, left
// to right (piece 0: one product). The deterministic chunked pass caps its products' width
// this way, so that each product has a width its library was checked at (kernels/gemm_columns.hpp).
template <typename T>
void multiply_in_pieces(MatrixView<T> c, ConstMatrixView<T> a, Op op_a, ConstMatrixView<T> b, Accumulate mode,
                        Index piece);
template <typename T>
void multiply_in_pieces(MatrixView<T> c, const Operand<T>& a, Op op_a, const Operand<T>& b, Accumulate mode,
                        Index piece);

// The products inside a kernel that works in cache (attention's per-head tiles, kernels/
// attention_*.hpp), on strided views: c = op(a) op(b), or c += op(a) op(b), computed by Eigen
// under every compute.gemm (under compute.precision bf16, by our vdpbf16ps kernel: Note [bf16
// tiles]). A library call per (64, 64) tile would cost more than the tile, and Eigen's are the
// bits every release has computed there. multiply() and this are the only
// places a product is computed, so that a precision or a library is chosen in kernels/.
template <typename T>
void multiply_tile(StridedView<T> c, ConstStridedView<T> a, Op op_a, ConstStridedView<T> b, Op op_b, Accumulate mode);

// One product's dimensions as above, for calibration and the benchmarks.
struct GemmShape {
  Index m = 0, n = 0, k = 0;
  Op op_a = Op::kNone, op_b = Op::kNone;
  bool operator==(const GemmShape&) const = default;
};
std::string gemm_shape_text(const GemmShape& shape);  // "1024x128x784 TN"

// What a product computes in a layer's pass. The deterministic chunked pass cuts forward and
// input-gradient products into pieces, each kind at the widest at which its library keeps a
// column's bits (kernels/gemm_columns.hpp).
enum class GemmRole { kForward, kWeightGradient, kInputGradient };

// A product a layer makes `count` times in one forward and backward pass (a convolution makes
// its products once per sample).
struct GemmCall {
  // The role has no default: a layer that left it out would have its input-gradient
  // products cut at the forward products' width, and lose the same bits at every N.
  GemmCall(GemmShape shape_, Index count_, GemmRole role_) : shape(shape_), count(count_), role(role_) {}
  GemmShape shape;
  Index count = 1;
  GemmRole role;
};

// The multiply-adds (m n k) of a typical product among calls: the weighted median, the size
// of the product in which the step's middle multiply-add is computed. Whether a second
// thread pays depends on the size of each product it would split, not on the step's total:
// a convolution's thousands of per-sample products are each too small to share. 0 for none.
double typical_product_multiply_adds(const std::vector<GemmCall>& calls);

}  // namespace mpiddp::kernels
