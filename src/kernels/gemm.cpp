#include "mpiddp/kernels/gemm.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "gemm_backends/gemm_kernels.hpp"
#include "mpiddp/kernels/precision.hpp"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace mpiddp::kernels {
namespace {

using gemm_detail::GemmKernels;
using gemm_detail::use_product_threads;

// The libraries CMake found, each null when absent (gemm_backends/, MPIDDP_HAVE_*).
const GemmKernels* kernels_of(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::kEigen: return nullptr;
#ifdef MPIDDP_HAVE_OPENBLAS
    case GemmBackend::kOpenBlas: return gemm_detail::openblas_kernels();
#endif
#ifdef MPIDDP_HAVE_BLIS
    case GemmBackend::kBlis: return gemm_detail::blis_kernels();
#endif
#ifdef MPIDDP_HAVE_ONEDNN
    case GemmBackend::kOneDnn: return gemm_detail::onednn_kernels();
#endif
    default: return nullptr;
  }
}

constexpr GemmBackend kAllBackends[] = {GemmBackend::kEigen, GemmBackend::kOpenBlas, GemmBackend::kBlis,
                                        GemmBackend::kOneDnn};

bool available(GemmBackend backend) { return backend == GemmBackend::kEigen || kernels_of(backend); }

// Set once at setup, before any pass; read by every product.
std::atomic<GemmBackend> backend_in_use{GemmBackend::kEigen};

// Note [threads per product]
// A rank's compute threads (`threads`) pay off only on a product big enough to share: waking
// a second thread for a small one costs more than it saves (core/threads.hpp,
// kMinParallelProduct). A model's products differ by orders of magnitude (a transformer's
// projections against its head, a convolution of one sample against a linear layer), so with
// `threads` auto the count is chosen per product: below one_thread_below multiply-adds the
// product runs on one thread, above it on the rank's count. The counts (Eigen's, OpenMP's for
// oneDNN, the library's own pool) are set together, and only when Eigen's, which always moves
// with them, differs from the product's; only the main thread computes products. Without a
// limit nothing is set here: every product runs on the counts use_threads and
// use_gemm_backend set, as before there was a choice.
std::atomic<int> rank_threads{1};         // use_gemm_backend's count
std::atomic<double> one_thread_below{0};  // use_one_thread_below's

// Eigen's own expressions, exactly as the layers wrote them before there was a choice, so the
// eigen backend keeps their bits.
template <typename T, typename A, typename B>
void eigen_product(MatrixView<T>& c, const A& a, const B& b, Accumulate mode) {
  if (mode == Accumulate::kAdd)
    c.noalias() += a * b;
  else
    c.noalias() = a * b;
}

template <typename T>
void eigen_multiply(MatrixView<T> c, ConstMatrixView<T> a, Op op_a, ConstMatrixView<T> b, Op op_b,
                    Accumulate mode) {
  const bool ta = op_a == Op::kTranspose, tb = op_b == Op::kTranspose;
  if (!ta && !tb) eigen_product(c, a, b, mode);
  if (ta && !tb) eigen_product(c, a.transpose(), b, mode);
  if (!ta && tb) eigen_product(c, a, b.transpose(), mode);
  if (ta && tb) eigen_product(c, a.transpose(), b.transpose(), mode);
}

template <typename T>
gemm_detail::GemmFunction<T> library_function(const GemmKernels& kernels) {
  if constexpr (std::is_same_v<T, float>)
    return kernels.sgemm;
  else
    return kernels.dgemm;
}

}  // namespace

void gemm_detail::use_product_threads(double multiply_adds, const GemmKernels* kernels) {
  const double limit = one_thread_below.load(std::memory_order_relaxed);
  if (limit <= 0) return;
  const int threads = multiply_adds < limit ? 1 : rank_threads.load(std::memory_order_relaxed);
  if (threads == Eigen::nbThreads()) return;
  Eigen::setNbThreads(threads);
#ifdef _OPENMP
  omp_set_num_threads(threads);
#endif
  if (kernels) kernels->set_threads(threads);
}

const char* gemm_backend_name(GemmBackend backend) {
  switch (backend) {
    case GemmBackend::kEigen: return "eigen";
    case GemmBackend::kOpenBlas: return "openblas";
    case GemmBackend::kBlis: return "blis";
    case GemmBackend::kOneDnn: return "onednn";
  }
  return "?";
}

std::vector<std::string> gemm_backend_names() {
  std::vector<std::string> names;
  for (GemmBackend b : kAllBackends) names.push_back(gemm_backend_name(b));
  return names;
}

std::vector<GemmBackend> available_gemm_backends() {
  std::vector<GemmBackend> found;
  for (GemmBackend b : kAllBackends)
    if (available(b)) found.push_back(b);
  return found;
}

bool find_gemm_backend(const std::string& name, GemmBackend* backend) {
  for (GemmBackend b : kAllBackends)
    if (name == gemm_backend_name(b) && available(b)) {
      *backend = b;
      return true;
    }
  return false;
}

std::string gemm_backend_library(GemmBackend backend) {
  const GemmKernels* kernels = kernels_of(backend);
  if (!kernels) return "Eigen " + std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                       std::to_string(EIGEN_MINOR_VERSION) + " (compiled in)";
  Dl_info info{};
  std::string file = "?";
  if (dladdr(kernels->entry_point, &info) && info.dli_fname) file = info.dli_fname;
  return file + " (" + kernels->threading() + ")";
}

void use_gemm_backend(GemmBackend backend, int threads) {
  if (!available(backend))
    throw std::invalid_argument(std::string("gemm backend ") + gemm_backend_name(backend) + " is not built in");
  // Every library present gets the count, chosen or not: an idle pthread pool sized for
  // the whole machine would still wake up in a library that is only linked.
  for (GemmBackend b : kAllBackends)
    if (const GemmKernels* kernels = kernels_of(b)) kernels->set_threads(threads);
  backend_in_use.store(backend, std::memory_order_relaxed);
  rank_threads.store(threads, std::memory_order_relaxed);
}

void use_one_thread_below(double multiply_adds) { one_thread_below.store(multiply_adds, std::memory_order_relaxed); }
double one_thread_limit() { return one_thread_below.load(std::memory_order_relaxed); }

GemmBackend gemm_backend_in_use() { return backend_in_use.load(std::memory_order_relaxed); }

namespace {

template <typename T>
void multiply_by_library(MatrixView<T> c, ConstMatrixView<T> a, Op op_a, ConstMatrixView<T> b, Op op_b,
                         Accumulate mode) {
  const GemmKernels* kernels = kernels_of(gemm_backend_in_use());
  const gemm_detail::GemmFunction<T> function = kernels ? library_function<T>(*kernels) : nullptr;
  const Index k = op_a == Op::kTranspose ? a.rows() : a.cols();
  // An empty product is a no-op or a zero fill; BLAS libraries disagree on ld checks for them.
  use_product_threads(static_cast<double>(c.rows()) * static_cast<double>(c.cols()) * static_cast<double>(k), kernels);
  if (!function || c.size() == 0 || k == 0) return eigen_multiply(c, a, op_a, b, op_b, mode);
  function(op_a, op_b, c.rows(), c.cols(), k, a.data(), a.rows(), b.data(), b.rows(),
           mode == Accumulate::kAdd ? T(1) : T(0), c.data(), c.rows());
}

}  // namespace

void gemm_detail::multiply_float32(MatrixView<float> c, ConstMatrixView<float> a, Op op_a, ConstMatrixView<float> b,
                                   Op op_b, Accumulate mode) {
  multiply_by_library(c, a, op_a, b, op_b, mode);
}

const GemmKernels* gemm_detail::bf16_kernels() {
#ifdef MPIDDP_HAVE_ONEDNN
  return gemm_detail::onednn_kernels();
#else
  return nullptr;
#endif
}

// compute.precision applies to float products only: bf16 with a float64 model is refused at
// the config (docs/precision.md), and the float64 checks stay float64.
template <typename T>
void multiply(MatrixView<T> c, const Operand<T>& a, Op op_a, const Operand<T>& b, Op op_b, Accumulate mode) {
  if constexpr (std::is_same_v<T, float>)
    if (precision_in_use() != Precision::kFloat32) return gemm_detail::multiply_in_precision(c, a, op_a, b, op_b, mode);
  multiply_by_library(c, a.values, op_a, b.values, op_b, mode);
}

template <typename T>
void multiply(MatrixView<T> c, ConstMatrixView<T> a, Op op_a, ConstMatrixView<T> b, Op op_b, Accumulate mode) {
  multiply(c, Operand<T>{a}, op_a, Operand<T>{b}, op_b, mode);
}

template <typename T>
void multiply_in_pieces(MatrixView<T> c, const Operand<T>& a, Op op_a, const Operand<T>& b, Accumulate mode,
                        Index piece) {
  const Index n = c.cols();
  if (piece <= 0 || piece >= n) return multiply(c, a, op_a, b, Op::kNone, mode);
  const Index rows = b.values.rows();
  for (Index first = 0; first < n; first += piece) {
    const Index width = std::min(piece, n - first);
    const Operand<T> columns{ConstMatrixView<T>(b.values.data() + first * rows, rows, width),
                             b.bf16 ? b.bf16 + first * rows : nullptr};
    multiply(MatrixView<T>(c.data() + first * c.rows(), c.rows(), width), a, op_a, columns, Op::kNone, mode);
  }
}

template <typename T>
void multiply_in_pieces(MatrixView<T> c, ConstMatrixView<T> a, Op op_a, ConstMatrixView<T> b, Accumulate mode,
                        Index piece) {
  multiply_in_pieces(c, Operand<T>{a}, op_a, Operand<T>{b}, mode, piece);
}

std::string gemm_shape_text(const GemmShape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) + " " +
         (s.op_a == Op::kTranspose ? "T" : "N") + (s.op_b == Op::kTranspose ? "T" : "N");
}

double typical_product_multiply_adds(const std::vector<GemmCall>& calls) {
  std::vector<std::pair<double, double>> sizes;  // (one product's multiply-adds, all of its calls')
  double total = 0.0;
  for (const GemmCall& call : calls) {
    const double one = static_cast<double>(call.shape.m) * static_cast<double>(call.shape.n) *
                       static_cast<double>(call.shape.k);
    sizes.emplace_back(one, one * static_cast<double>(call.count));
    total += one * static_cast<double>(call.count);
  }
  std::sort(sizes.begin(), sizes.end());
  double below = 0.0;
  for (const auto& [one, all] : sizes) {
    below += all;
    if (2.0 * below >= total) return one;
  }
  return 0.0;
}

template void multiply_in_pieces<float>(MatrixView<float>, ConstMatrixView<float>, Op, ConstMatrixView<float>,
                                        Accumulate, Index);
template void multiply_in_pieces<double>(MatrixView<double>, ConstMatrixView<double>, Op, ConstMatrixView<double>,
                                         Accumulate, Index);
template void multiply<float>(MatrixView<float>, ConstMatrixView<float>, Op, ConstMatrixView<float>, Op, Accumulate);
template void multiply<double>(MatrixView<double>, ConstMatrixView<double>, Op, ConstMatrixView<double>, Op,
                               Accumulate);
template void multiply_in_pieces<float>(MatrixView<float>, const Operand<float>&, Op, const Operand<float>&,
                                        Accumulate, Index);
template void multiply_in_pieces<double>(MatrixView<double>, const Operand<double>&, Op, const Operand<double>&,
                                         Accumulate, Index);
template void multiply<float>(MatrixView<float>, const Operand<float>&, Op, const Operand<float>&, Op, Accumulate);
template void multiply<double>(MatrixView<double>, const Operand<double>&, Op, const Operand<double>&, Op,
                               Accumulate);

}  // namespace mpiddp::kernels
