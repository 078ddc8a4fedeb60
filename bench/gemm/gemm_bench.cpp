// The matrix products of a workload, timed with every library built in: the measurement
// behind compute.gemm (docs/benchmarks.md). Builds the config's model, takes its products
// for one rank's batch (nn::Layer::gemm_calls) and prints, per product and library, the best
// GFLOP/s over the repeats, by wall time and by the thread's CPU time (which a busy machine
// disturbs less), as one JSON line each, then the whole pass per library.
//
// Usage: gemm_bench CONFIG.json [--np N] [--threads T] [--repeats R]
//   --np N: the world size whose per-rank batch the products use (default 2)
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/data/source.hpp"
#include "mpiddp/kernels/gemm_calibration.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/config/config.hpp"

namespace {

using namespace mpiddp;

double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Best {
  double wall = std::numeric_limits<double>::infinity();
  double cpu = std::numeric_limits<double>::infinity();
};

Best time_call(const kernels::GemmShape& s, int repeats, kernels::GemmOperands<float>& ops) {
  auto run = [&] { ops.multiply(s); };
  run();  // warm-up
  Best best;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = thread_cpu_seconds();
    run();
    best.cpu = std::min(best.cpu, thread_cpu_seconds() - cpu_start);
    best.wall = std::min(best.wall, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gemm_bench CONFIG.json [--np N] [--threads T] [--repeats R]\n");
    return 2;
  }
  int np = 2, threads = 1, repeats = 20;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--np")) np = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else return std::fprintf(stderr, "gemm_bench: unknown option %s\n", argv[i]), 2;
  }
  try {
    const config::Config config = config::parse_config(config::read_config_file(argv[1]));
    const auto data = data::load_source<float>(config.train_data, config.seed, "train");
    const Index batch = config.per_rank_batch(np);
    const nn::Model<float> model(config::model_input_shape(config, data.shape, data.features, "data.train"),
                                      config.layers, batch, 1);
    const std::vector<kernels::GemmCall> calls = model.gemm_calls(batch);
    kernels::GemmOperands<float> ops(calls);
    use_threads(threads);
    std::printf("# %s: %s, per-rank batch %lld at np=%d, %d thread(s), best of %d\n", argv[1],
                model.describe().c_str(), static_cast<long long>(batch), np, threads, repeats);
    for (kernels::GemmBackend backend : kernels::available_gemm_backends()) {
      kernels::use_gemm_backend(backend, threads);
      double pass_wall = 0.0, pass_cpu = 0.0, flops = 0.0;
      for (const auto& call : calls) {
        const Best best = time_call(call.shape, repeats, ops);
        const double f = 2.0 * static_cast<double>(call.shape.m) * static_cast<double>(call.shape.n) * static_cast<double>(call.shape.k);
        pass_wall += best.wall * static_cast<double>(call.count);
        pass_cpu += best.cpu * static_cast<double>(call.count);
        flops += f * static_cast<double>(call.count);
        std::printf("{\"backend\": \"%s\", \"shape\": \"%s\", \"count\": %lld, \"gflops_wall\": %.1f, \"gflops_cpu\": %.1f}\n",
                    kernels::gemm_backend_name(backend), kernels::gemm_shape_text(call.shape).c_str(),
                    static_cast<long long>(call.count), f / best.wall * 1e-9, f / best.cpu * 1e-9);
      }
      std::printf("{\"backend\": \"%s\", \"library\": \"%s\", \"pass_ms_wall\": %.3f, \"pass_ms_cpu\": %.3f, \"gflops_wall\": %.1f, \"gflops_cpu\": %.1f}\n",
                  kernels::gemm_backend_name(backend), kernels::gemm_backend_library(backend).c_str(), pass_wall * 1e3,
                  pass_cpu * 1e3, flops / pass_wall * 1e-9, flops / pass_cpu * 1e-9);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "gemm_bench: %s\n", e.what());
    return e.code();
  }
  return 0;
}
