#include "mpiddp/core/threads.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include <Eigen/Core>

#include "mpiddp/core/interrupt.hpp"
#ifdef _OPENMP
#include <omp.h>
#endif

namespace mpiddp {
namespace {

// The count use_threads set last. Eigen's own count is not it: kernels/gemm.cpp lowers that
// for a small product (Note [threads per product] there).
std::atomic<int> compute_threads{1};

}  // namespace

ThreadChoice choose_threads(int64_t configured, const char* omp_env, int cores, int node_cores,
                            int ranks_on_node, double typical_product) {
  if (configured > 0) return {static_cast<int>(configured), "config"};
  if (omp_env && *omp_env) {
    char* end = nullptr;
    const long value = std::strtol(omp_env, &end, 10);
    // OpenMP allows a list ("4,2") for nested levels: the first entry is ours.
    if (end != omp_env && value > 0 && (*end == '\0' || *end == ',')) return {static_cast<int>(value), "OMP_NUM_THREADS"};
  }
  if (typical_product < kMinParallelProduct) return {1, "auto"};
  const int share = node_cores / std::max(1, ranks_on_node);
  return {std::max(1, std::min(cores, share)), "auto", kMinParallelProduct};
}

int affinity_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return node_cores();
  return std::max(1, CPU_COUNT(&set));
}

int node_cores() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

void use_threads(int threads) {
  compute_threads.store(threads, std::memory_order_relaxed);
  Eigen::setNbThreads(threads);
#ifdef _OPENMP
  omp_set_num_threads(threads);
  // The team's threads are created here, with the terminating signals blocked, so that they
  // inherit the block whoever calls (Note [no signals in the compute threads] in
  // src/core/interrupt.cpp); later parallel regions reuse them.
  with_interrupts_blocked([](int team) {
#pragma omp parallel num_threads(team)
    { [[maybe_unused]] volatile int started = omp_get_thread_num(); }
  }, threads);
#endif
}

int threads_in_use() { return compute_threads.load(std::memory_order_relaxed); }

}  // namespace mpiddp
