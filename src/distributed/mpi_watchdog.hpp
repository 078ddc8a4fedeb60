#pragma once
// The collective watchdog: see Note [the watchdog] in mpi_watchdog.cpp and docs/reliability.md.
// Internal to src/distributed/: only mpi_*.cpp include this header.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace mpiddp::distributed {

// The collectives MpiCommunicator makes, by number, so a rank can tell another which one
// it is waiting in (the number travels in a status reply).
enum class Collective : int64_t {
  kNone = 0,
  kAllreduceSumFloat,
  kAllreduceSumDouble,
  kAllreduceMaxDouble,
  kBroadcast,
  kAllgather,
  kAllgatherStrings,
  kBarrier,
  kSharedWindow,  // MPI_Win_allocate_shared: the node's ranks create a window together
  kAllreduceSumInt64,  // deterministic mode's fixed-point sums (appended: peers exchange these values)
};
const char* collective_name(Collective c);

// What one rank is doing, as the watchdog sees it. Written by the main thread around every
// collective and at every step, read by the watchdog thread and sent to peers on request.
struct ProgressSnapshot {
  int64_t step = 0;          // the step last published by the trainer
  int64_t collectives = 0;   // collectives entered so far (the current one included)
  bool waiting = false;      // inside a collective now
  Collective call = Collective::kNone;
  double seconds_in_state = 0.0;  // inside the current collective, or since leaving the last
};

class MpiWatchdog {
 public:
  // Collective (right after MPI_Init): duplicates MPI_COMM_WORLD as the side channel and
  // starts the thread, which answers peers but reports nothing until start().
  MpiWatchdog(int rank, int size);
  ~MpiWatchdog();  // stops the thread
  MpiWatchdog(const MpiWatchdog&) = delete;
  MpiWatchdog& operator=(const MpiWatchdog&) = delete;

  // Sets the timeout (0: report nothing) and the action; local, may be called again.
  void start(double timeout_s, bool abort_job);
  void stop();

  // Main thread, cheap (a mutex nobody else holds except for microseconds).
  void publish_step(int64_t step);
  void enter(Collective call);
  void leave();

 private:
  using Clock = std::chrono::steady_clock;
  ProgressSnapshot snapshot();
  void run();
  void serve_requests();
  void check_own_wait();
  void report(const ProgressSnapshot& mine);

  const int rank_, size_;
  // Set by start(), which may be called again to change them; read by the thread.
  std::atomic<double> timeout_s_{0.0};
  std::atomic<bool> abort_job_{true};
  bool can_query_ = false;  // MPI_THREAD_MULTIPLE: the thread may talk to peers

  std::mutex progress_mutex_;  // guards the four fields below
  int64_t step_ = 0, collectives_ = 0;
  Collective call_ = Collective::kNone;
  Clock::time_point since_ = Clock::now();

  // Thread state.
  std::thread thread_;
  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  MPI_Comm side_ = MPI_COMM_NULL;
  MPI_Request request_recv_ = MPI_REQUEST_NULL;
  int64_t request_buffer_ = 0;
  int64_t reported_collective_ = 0;        // the collective the last report was about
  Clock::time_point next_report_;          // warn: when to report the same wait again
};

}  // namespace mpiddp::distributed
