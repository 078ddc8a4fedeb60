// What bounds the shared-memory gradient sum on one node: the same kernel
// (sum_slice_into_every, the one SharedMemorySum::sum_resident runs) over the same bytes, in
// private memory, with no MPI, window or barrier. A rank of the shm sum at R ranks reads its
// 1/R slice of every rank's buffer and writes the result into every rank's buffer; here one
// process holds R buffers of COUNT floats and does the same for one slice. Run R copies at
// once to load the memory system as the R ranks do:
//   for i in 1 2; do build/sum_bound 21020683 2 & done; wait
// With `threads`, R threads pinned to cores 0..R-1 share the R buffers as the ranks share
// the node's window, and each round is a training step's: every thread first writes its own
// buffer (backward writes its gradients), then all meet and each sums its slice of every
// buffer into every buffer, and they meet again. That sum must first move the other
// threads' freshly written lines out of their cores' caches, as the shm sum in training does
// after backward; the time is from the first meeting to the second (the slowest slice).
// Prints the best and the median of REPEATS timings and the bytes one rank (in `threads`
// mode one thread) moves per second. If the shared-memory sum takes about as long, nothing
// but the bytes is left to cut.
// Usage: sum_bound COUNT [RANKS [REPEATS [threads]]]   (mlp: 1863692 floats, wide: 21020683)
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "../../src/distributed/sum_kernels.hpp"
#include "pin_thread.hpp"

namespace {

constexpr int kWarmUp = 3;  // untimed calls first, as bench --reduce-only

// One process sums slice 0 of every buffer into every buffer: the time of each call.
std::vector<double> time_one_process(std::vector<void*>& segments, size_t slice, int repeats) {
  const int ranks = static_cast<int>(segments.size());
  std::vector<double> ms;
  for (int r = 0; r < repeats + kWarmUp; ++r) {
    const auto start = std::chrono::steady_clock::now();
    mpiddp::distributed::sum_slice_into_every(segments.data(), ranks, segments.data(), ranks, 0, slice,
                                              mpiddp::distributed::ElementType::kFloat32, 1.0 / ranks);
    const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
    if (r >= kWarmUp) ms.push_back(took.count());
  }
  return ms;
}

// The threaded form (see the top): each round's time from the first meeting to the second,
// as seen by thread 0 (every thread leaves the second meeting together).
std::vector<double> time_after_writes(std::vector<std::vector<float>>& buffers, std::vector<void*>& segments,
                                      size_t slice, int repeats) {
  const int ranks = static_cast<int>(buffers.size());
  const size_t count = buffers[0].size();
  std::barrier meet(ranks);
  std::vector<double> ms;
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  auto rank = [&](int r) {
    if (!pin_this_thread(r % std::max(1, cores)))
      std::fprintf(stderr, "sum_bound: cannot pin thread %d to a core of its own\n", r);
    const size_t first = std::min(count, slice * static_cast<size_t>(r));
    const size_t last = std::min(count, first + slice);
    for (int round = 0; round < repeats + kWarmUp; ++round) {
      std::fill(buffers[static_cast<size_t>(r)].begin(), buffers[static_cast<size_t>(r)].end(),
                1.0f + static_cast<float>(round % 7));
      meet.arrive_and_wait();
      const auto start = std::chrono::steady_clock::now();
      mpiddp::distributed::sum_slice_into_every(segments.data(), ranks, segments.data(), ranks, first, last,
                                                mpiddp::distributed::ElementType::kFloat32, 1.0 / ranks);
      meet.arrive_and_wait();
      const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
      if (r == 0 && round >= kWarmUp) ms.push_back(took.count());
    }
  };
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(rank, r);
  for (auto& t : threads) t.join();
  return ms;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: sum_bound COUNT [RANKS [REPEATS [threads]]]\n");
    return 2;
  }
  const size_t count = std::strtoull(argv[1], nullptr, 10);
  const int ranks = argc > 2 ? std::atoi(argv[2]) : 2;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 20;
  const bool threaded = argc > 4 && std::strcmp(argv[4], "threads") == 0;
  if (argc > 4 && !threaded) {
    std::fprintf(stderr, "sum_bound: the fourth argument can only be 'threads'\n");
    return 2;
  }
  if (count == 0 || ranks < 1 || repeats < 1) {
    std::fprintf(stderr, "sum_bound: COUNT, RANKS and REPEATS must be positive\n");
    return 2;
  }
  // Every buffer written once before timing, so no page fault is timed.
  std::vector<std::vector<float>> buffers(static_cast<size_t>(ranks), std::vector<float>(count, 1.0f));
  std::vector<void*> segments;
  for (auto& b : buffers) segments.push_back(b.data());
  const size_t slice = (count + static_cast<size_t>(ranks) - 1) / static_cast<size_t>(ranks);
  std::vector<double> ms = threaded ? time_after_writes(buffers, segments, slice, repeats)
                                    : time_one_process(segments, slice, repeats);
  std::sort(ms.begin(), ms.end());
  // Read every buffer's slice, write every buffer's slice.
  const double bytes = 2.0 * ranks * static_cast<double>(slice) * sizeof(float);
  std::printf("{\"mode\":\"%s\",\"count\":%zu,\"ranks\":%d,\"slice_mb\":%.3f,\"bytes_mb\":%.1f,\"best_ms\":%.3f,"
              "\"median_ms\":%.3f,\"gb_per_s\":%.2f}\n",
              threaded ? "threads" : "one process", count, ranks, slice * sizeof(float) / 1e6, bytes / 1e6, ms.front(), ms[ms.size() / 2],
              bytes / 1e6 / ms[ms.size() / 2]);
  return 0;
}
