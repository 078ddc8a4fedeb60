// What bounds the shared-memory gradient sum on one node: the same kernel
// (sum_slice_into_every, the one SharedMemorySum::sum_resident runs) over the same bytes, in
// private memory, with no MPI, window or barrier. A rank of the shm sum at R ranks reads its
// 1/R slice of every rank's buffer and writes the result into every rank's buffer; here one
// process holds R buffers of COUNT floats and does the same for one slice. Run R copies at
// once to load the memory system as the R ranks do:
//   for i in 1 2; do build/sum_bound 21020683 2 & done; wait
// Prints the best and the median of REPEATS timings and the bytes moved per second. If the
// shared-memory sum takes about as long, nothing but the bytes is left to cut.
// Usage: sum_bound COUNT [RANKS [REPEATS]]   (mlp: 1863692 floats, wide: 21020683)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../src/distributed/sum_kernels.hpp"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sum_bound COUNT [RANKS [REPEATS]]\n");
    return 2;
  }
  const size_t count = std::strtoull(argv[1], nullptr, 10);
  const int ranks = argc > 2 ? std::atoi(argv[2]) : 2;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 20;
  if (count == 0 || ranks < 1 || repeats < 1) {
    std::fprintf(stderr, "sum_bound: COUNT, RANKS and REPEATS must be positive\n");
    return 2;
  }
  // Every buffer written once before timing, so no page fault is timed.
  std::vector<std::vector<float>> buffers(static_cast<size_t>(ranks), std::vector<float>(count, 1.0f));
  std::vector<void*> segments;
  for (auto& b : buffers) segments.push_back(b.data());
  const size_t slice = (count + static_cast<size_t>(ranks) - 1) / static_cast<size_t>(ranks);
  std::vector<double> ms;
  for (int r = 0; r < repeats + 3; ++r) {  // 3 warm-up calls, as bench --reduce-only
    const auto start = std::chrono::steady_clock::now();
    mpiddp::distributed::sum_slice_into_every(segments.data(), ranks, segments.data(), ranks, 0, slice,
                                              mpiddp::distributed::ElementType::kFloat32, 1.0 / ranks);
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (r >= 3) ms.push_back(took.count());
  }
  std::sort(ms.begin(), ms.end());
  // Read every buffer's slice, write every buffer's slice.
  const double bytes = 2.0 * ranks * static_cast<double>(slice) * sizeof(float);
  std::printf("{\"count\":%zu,\"ranks\":%d,\"slice_mb\":%.3f,\"bytes_mb\":%.1f,\"best_ms\":%.3f,"
              "\"median_ms\":%.3f,\"gb_per_s\":%.2f}\n",
              count, ranks, slice * sizeof(float) / 1e6, bytes / 1e6, ms.front(), ms[ms.size() / 2],
              bytes / 1e6 / ms[ms.size() / 2]);
  return 0;
}
