#pragma once
// Timing the matrix-product libraries on a model's own products, so compute.gemm=auto picks
// the fastest on the machine at hand (the trainer's choice: train/gemm_choice.hpp).
#include <vector>

#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::kernels {

struct GemmTiming {
  GemmBackend backend;
  double seconds = 0.0;  // one forward and backward pass's products, the best of the repeats
};

// Operands for the largest of `calls`, filled with small values (no denormals, no overflow)
// and shared by all of them: what the calibration and bench/gemm/gemm_bench time.
template <typename T>
class GemmOperands {
 public:
  explicit GemmOperands(const std::vector<GemmCall>& calls);
  void multiply(const GemmShape& shape);  // c = op(a) op(b) with this shape

 private:
  std::vector<T> a_, b_, c_;
};

// Times every available backend on `calls` in T (float or double) with `threads` threads each: a warm-up,
// then passes until each backend has had its share of `budget_s` (at least 3 passes). A
// call made `count` times is timed over at most 8 runs and scaled. One thread is timed by
// its CPU time, more by the wall clock. Leaves the process on
// the backend it was on.
template <typename T>
std::vector<GemmTiming> time_gemm_backends(const std::vector<GemmCall>& calls, int threads, double budget_s);

// The fastest of `timings`; a library must beat Eigen by `margin` (0.03: 3 %) to be chosen,
// so that a near tie does not swap libraries from one machine state to the next.
GemmBackend fastest_gemm_backend(const std::vector<GemmTiming>& timings, double margin);

}  // namespace mpiddp::kernels
