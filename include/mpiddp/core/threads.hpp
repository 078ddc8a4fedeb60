#pragma once
// How many compute threads a rank uses. Eigen parallelises its matrix products with OpenMP;
// with one rank per core that would only make ranks fight over cores, so the default gives
// each rank its share of the node: with 2 ranks on 2 cores each is single-threaded, with
// 1 rank it uses both cores.
#include <cstdint>
#include <string>

namespace mpiddp {

// Below this many multiply-adds a matrix product runs on one thread by default: waking a
// second thread for a small product costs more than it saves. Measured on the cnn workload
// (docs/benchmarks.md): its typical product, a 3x3 convolution of one sample (196 x 32 x 288,
// 1.8 M), ran slower on two threads than on one (746 against 1,049 samples/s); the mlp's
// (128 x 1024 x 784, 103 M) runs 1.7 x faster.
constexpr double kMinParallelProduct = double(1 << 23);

struct ThreadChoice {
  int threads = 1;
  std::string source;  // "config" | "OMP_NUM_THREADS" | "auto"
  // Products of fewer multiply-adds run on one thread (kernels::use_one_thread_below): the
  // threads are chosen per product with auto, and all of them run on `threads` otherwise.
  double one_thread_below = 0;
};

// configured: the config's `threads` (0: not set); omp_env: the OMP_NUM_THREADS value or
// null; cores: the cores this process may run on; node_cores: the node's cores;
// ranks_on_node: ranks sharing this node; typical_product: multiply-adds of a typical matrix
// product of one step of this rank (kernels::typical_product_multiply_adds). Precedence:
// config, then OMP_NUM_THREADS, then auto: one thread when typical_product is below
// kMinParallelProduct (a model of small products only: the cnn's per-sample convolutions ran
// 6-10 % slower with a second thread idle beside them than without one, docs/benchmarks.md),
// else min(cores, node_cores / ranks_on_node), at least 1, with each product below
// kMinParallelProduct multiply-adds on one thread.
ThreadChoice choose_threads(int64_t configured, const char* omp_env, int cores, int node_cores,
                            int ranks_on_node, double typical_product);

// The cores this process may run on (its CPU affinity mask; a launcher may bind it to one).
int affinity_cores();
// The node's online cores.
int node_cores();

// Sets Eigen's and OpenMP's thread count.
void use_threads(int threads);
// The count use_threads set last: the rank's compute threads (Eigen's own count may be lower
// for a small product, Note [threads per product] in kernels/gemm.cpp).
int threads_in_use();

}  // namespace mpiddp
