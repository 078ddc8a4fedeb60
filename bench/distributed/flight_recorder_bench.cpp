// What the flight recorder adds to each collective: MpiWatchdog::enter and leave without and
// with the ring's stores, measured as the same bookkeeping here (a mutex, a clock read and a
// few fields per call), MPI-free. Prints ns per collective (one enter and one leave).
// Usage: flight_recorder_bench [COLLECTIVES]   (10,000,000 by default)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "mpiddp/distributed/flight_recorder.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using mpiddp::distributed::Collective;

// The watchdog's progress fields, as in src/distributed/mpi_watchdog.hpp.
struct Progress {
  std::mutex mutex;
  int64_t step = 0, collectives = 0;
  Collective call = Collective::kNone;
  Clock::time_point since;
  mpiddp::distributed::FlightRing ring;
};

int64_t ns(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

template <bool kRing>
double ns_per_collective(Progress& p, long n) {
  const auto start = Clock::now();
  for (long i = 0; i < n; ++i) {
    {  // enter
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(p.mutex);
      ++p.collectives;
      p.call = Collective::kAllreduceSumFloat;
      p.since = now;
      if constexpr (kRing) p.ring.enter(p.collectives, p.call, 10952, p.step, ns(now));
    }
    {  // leave
      const auto now = Clock::now();
      std::lock_guard<std::mutex> lock(p.mutex);
      p.call = Collective::kNone;
      p.since = now;
      if constexpr (kRing) p.ring.leave(ns(now));
    }
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / static_cast<double>(n);
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 10'000'000;
  Progress p;
  double without = 1e30, with = 1e30;
  for (int repeat = 0; repeat < 5; ++repeat) {  // the best of 5: the machine may be busy
    without = std::min(without, ns_per_collective<false>(p, n));
    with = std::min(with, ns_per_collective<true>(p, n));
  }
  std::printf("{\"collectives\":%ld,\"watchdog_ns\":%.1f,\"watchdog_and_ring_ns\":%.1f,\"ring_ns\":%.1f,"
              "\"check\":%lld}\n",
              n, without, with, with - without, static_cast<long long>(p.ring.entries().back().seq));
}
