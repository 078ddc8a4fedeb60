#include "mpiddp/kernels/gemm_calibration.hpp"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <limits>

namespace mpiddp::kernels {
namespace {

// Single-threaded products are timed by the thread's CPU time, which other processes on a
// busy machine disturb far less than the wall clock (they take the core, not our cycles);
// with more threads only the wall clock sees the workers.
double now_seconds(bool single_thread) {
  if (single_thread) {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr Index kMaxRunsPerCall = 8;

template <typename T>
double one_pass(const std::vector<GemmCall>& calls, GemmOperands<T>& ops, bool single_thread) {
  double total = 0.0;
  for (const GemmCall& call : calls) {
    const GemmShape& s = call.shape;
    const Index runs = std::min(call.count, kMaxRunsPerCall);
    const double start = now_seconds(single_thread);
    for (Index r = 0; r < runs; ++r) ops.multiply(s);
    const double seconds = now_seconds(single_thread) - start;
    total += seconds * static_cast<double>(call.count) / static_cast<double>(runs);
  }
  return total;
}

}  // namespace

template <typename T>
std::vector<GemmTiming> time_gemm_backends(const std::vector<GemmCall>& calls, int threads, double budget_s) {
  const GemmBackend previous = gemm_backend_in_use();
  const auto backends = available_gemm_backends();
  GemmOperands<T> ops(calls);
  std::vector<GemmTiming> timings;
  const double share = budget_s / static_cast<double>(backends.size());
  for (GemmBackend backend : backends) {
    use_gemm_backend(backend, threads);
    one_pass(calls, ops, threads == 1);  // warm-up: the library's buffers, its threads, the caches
    double best = std::numeric_limits<double>::infinity(), spent = 0.0;
    for (int pass = 0; pass < 3 || (spent < share && pass < 50); ++pass) {
      const double seconds = one_pass(calls, ops, threads == 1);
      best = std::min(best, seconds);
      spent += seconds;
    }
    timings.push_back({backend, best});
  }
  use_gemm_backend(previous, threads);
  return timings;
}

template std::vector<GemmTiming> time_gemm_backends<float>(const std::vector<GemmCall>&, int, double);
template std::vector<GemmTiming> time_gemm_backends<double>(const std::vector<GemmCall>&, int, double);

template <typename T>
GemmOperands<T>::GemmOperands(const std::vector<GemmCall>& calls) {
  Index a_size = 0, b_size = 0, c_size = 0;
  for (const GemmCall& call : calls) {
    a_size = std::max(a_size, call.shape.m * call.shape.k);
    b_size = std::max(b_size, call.shape.k * call.shape.n);
    c_size = std::max(c_size, call.shape.m * call.shape.n);
  }
  a_.resize(a_size);
  b_.resize(b_size);
  c_.assign(c_size, T(0));
  for (size_t i = 0; i < a_.size(); ++i) a_[i] = T(0.001) * static_cast<T>(i % 97);
  for (size_t i = 0; i < b_.size(); ++i) b_[i] = T(0.001) * static_cast<T>(i % 89);
}

template <typename T>
void GemmOperands<T>::multiply(const GemmShape& s) {
  const Index a_rows = s.op_a == Op::kTranspose ? s.k : s.m, b_rows = s.op_b == Op::kTranspose ? s.n : s.k;
  kernels::multiply(MatrixView<T>(c_.data(), s.m, s.n), ConstMatrixView<T>(a_.data(), a_rows, s.m * s.k / a_rows),
               s.op_a, ConstMatrixView<T>(b_.data(), b_rows, s.k * s.n / b_rows), s.op_b, Accumulate::kOverwrite);
}

template class GemmOperands<float>;
template class GemmOperands<double>;

GemmBackend fastest_gemm_backend(const std::vector<GemmTiming>& timings, double margin) {
  GemmBackend best = GemmBackend::kEigen;
  double best_seconds = std::numeric_limits<double>::infinity();
  for (const GemmTiming& t : timings)
    if (t.backend == GemmBackend::kEigen) best_seconds = t.seconds / (1.0 + margin);
  for (const GemmTiming& t : timings)
    if (t.backend != GemmBackend::kEigen && t.seconds < best_seconds) {
      best = t.backend;
      best_seconds = t.seconds;
    }
  return best;
}

}  // namespace mpiddp::kernels
