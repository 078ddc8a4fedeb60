// What bounds the optimizer sharded across the ranks of a node (reduce.shard_optimizer): the
// trainer's own SGD-with-momentum step over COUNT parameters, run by two threads pinned to
// two cores, with no MPI, window or trainer around it. Each round, as in training, both
// threads first read every parameter (forward reads them all), meet at a barrier, update,
// and meet again; only the update is timed. Three ways to update:
//   whole      each thread updates all of its own copy: the unsharded optimizer
//   node_copy  each thread updates its half of one copy both read: the sharded optimizer with
//              the node's one copy of the parameters (the shm path)
//   gather     each thread updates its half of its own copy, then copies the other half from
//              the other thread's: the sharded optimizer with private parameters and an
//              allgather
// A half updated by one core was read by the other in the same round, so the sharded forms
// pay for moving lines between the cores' caches (or through memory) on top of the update.
// Prints one JSON line per way: the median update time of each thread and the speed-up of
// the slower thread over `whole`'s. If mpiddp's sharded optimizer_ms is about node_copy's
// here, nothing is left to cut but the bytes.
// Usage: update_bound COUNT [REPEATS [CORE CORE]]   (mlp: 1863690 parameters, wide: 21020682)
#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/optim/update_rule.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "pin_thread.hpp"

namespace {

enum class Way { kWhole, kNodeCopy, kGather };
const char* name(Way way) {
  return way == Way::kWhole ? "whole" : way == Way::kNodeCopy ? "node_copy" : "gather";
}

// COUNT floats on the trainer's allocator (huge pages from 2 MiB).
using Buffer = std::vector<float, mpiddp::HugePageAllocator<float>>;

// Reads every value, eight sums at a time so the compiler vectorises it: the forward pass's
// reading of the parameters, which pulls their lines into this core's cache.
float read_all(const float* p, size_t count) {
  float sums[8] = {};
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    for (int k = 0; k < 8; ++k) sums[k] += p[i + k];
  for (; i < count; ++i) sums[0] += p[i];
  return std::accumulate(sums, sums + 8, 0.0f);
}

// The median update time of each of the two threads, in ms.
std::vector<double> run(Way way, size_t count, int repeats, const int cores[2]) {
  // Where part 1 begins: the trainer cuts at whole cache lines (optim/optimizer.hpp).
  const auto half = static_cast<size_t>(mpiddp::optim::part_begin(static_cast<mpiddp::Index>(count), 2, 1, sizeof(float)));
  Buffer shared(count), own0(count), own1(count), grads(count, 1e-4f);
  for (size_t i = 0; i < count; ++i) shared[i] = own0[i] = own1[i] = 1e-3f * static_cast<float>(i % 97);
  float* own[2] = {own0.data(), own1.data()};
  std::barrier meet(2);
  std::vector<double> medians(2);
  auto thread = [&](int t) {
    if (!pin_this_thread(cores[t]))
      std::fprintf(stderr, "update_bound: cannot pin a thread to core %d; its times are not two cores'\n", cores[t]);
    const size_t begin = way == Way::kWhole ? 0 : half * static_cast<size_t>(t);
    const size_t end = way == Way::kWhole ? count : (t == 0 ? half : count);
    mpiddp::optim::OptimizerConfig config;
    config.momentum = 0.9;
    auto sgd = mpiddp::optim::make_update_rule<float>(config, static_cast<mpiddp::Index>(end - begin));
    float* params = way == Way::kNodeCopy ? shared.data() : own[t];
    volatile float sink = 0;  // keeps read_all from being optimised away
    std::vector<double> ms;
    for (int r = 0; r < repeats + 3; ++r) {  // 3 warm-up rounds: pages, and momentum's first step
      sink = sink + read_all(params, count);
      meet.arrive_and_wait();
      const auto start = std::chrono::steady_clock::now();
      sgd->step(params + begin, grads.data() + begin, 0.01);
      if (way == Way::kGather) {
        meet.arrive_and_wait();  // the other half is final
        const size_t other_begin = t == 0 ? half : 0, other_end = t == 0 ? count : half;
        std::memcpy(params + other_begin, own[1 - t] + other_begin, (other_end - other_begin) * sizeof(float));
      }
      const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
      meet.arrive_and_wait();
      if (r >= 3) ms.push_back(took.count());
    }
    std::sort(ms.begin(), ms.end());
    medians[static_cast<size_t>(t)] = ms[ms.size() / 2];
  };
  std::thread first(thread, 0), second(thread, 1);
  first.join();
  second.join();
  return medians;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: update_bound COUNT [REPEATS [CORE CORE]]\n");
    return 2;
  }
  const size_t count = std::strtoull(argv[1], nullptr, 10);
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 50;
  const int cores[2] = {argc > 4 ? std::atoi(argv[3]) : 0, argc > 4 ? std::atoi(argv[4]) : 1};
  if (count < 2 || repeats < 1 || argc == 4 || argc > 5) {
    std::fprintf(stderr, "update_bound: COUNT must be at least 2, REPEATS positive, and the cores two or none\n");
    return 2;
  }
  mpiddp::configure_allocator();  // the trainer's allocator settings (core/memory.hpp)
  double whole = 0.0;
  for (Way way : {Way::kWhole, Way::kNodeCopy, Way::kGather}) {
    const std::vector<double> ms = run(way, count, repeats, cores);
    const double slower = std::max(ms[0], ms[1]);
    if (way == Way::kWhole) whole = slower;
    std::printf("{\"way\":\"%s\",\"count\":%zu,\"mb\":%.1f,\"update_ms\":[%.3f,%.3f],\"speedup\":%.2f}\n",
                name(way), count, static_cast<double>(count) * sizeof(float) / 1e6, ms[0], ms[1], whole / slower);
  }
  return 0;
}
