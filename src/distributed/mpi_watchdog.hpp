#pragma once
// The collective watchdog: see Note [the watchdog] in mpi_watchdog.cpp and docs/reliability.md.
// Internal to src/distributed/: only mpi_*.cpp include this header.
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mpiddp/distributed/flight_recorder.hpp"

namespace mpiddp::distributed {

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

  // Main thread, cheap (a mutex nobody else holds except for microseconds). enter also
  // records the collective in the flight recorder's ring, with its payload in bytes.
  void publish_step(int64_t step);
  void enter(Collective call, int64_t bytes);
  void leave();

  // Where this rank's flight recorder file goes (flight_file_path); "" writes none. Local.
  void set_flight_file(const std::string& path);
  // Writes the flight recorder file now (any thread; never from a signal handler).
  void write_flight(const std::string& reason);
  // abort_job's hook, before MPI_Abort: asks every peer's watchdog to write its flight
  // file, then writes this rank's. Does nothing when no watchdog exists.
  static void before_abort(int exit_code);

 private:
  using Clock = std::chrono::steady_clock;
  ProgressSnapshot snapshot();
  void run();
  void serve_requests();
  void check_own_wait();
  void report(const ProgressSnapshot& mine);
  void ask_peers_to_write_flight();

  const int rank_, size_;
  // (size) every rank's host (MPI_Get_processor_name), so a report names where a rank runs:
  // across nodes, "no answer" from every rank of one host points at that host or its link.
  std::vector<std::string> hosts_;
  // Set by start(), which may be called again to change them; read by the thread.
  std::atomic<double> timeout_s_{0.0};
  std::atomic<bool> abort_job_{true};
  bool can_query_ = false;  // MPI_THREAD_MULTIPLE: the thread may talk to peers

  std::mutex progress_mutex_;  // guards the six fields below
  int64_t step_ = 0, collectives_ = 0;
  Collective call_ = Collective::kNone;
  Clock::time_point since_ = Clock::now();
  FlightRing ring_;           // Note [the flight recorder] in flight_recorder.cpp
  std::string flight_file_;

  bool signal_written_ = false;    // thread only: the file was written for the signal
  bool peer_asked_ = false;        // thread only: a peer's query or request came in

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

// Marks the time this rank spends inside one collective, for the watchdog.
class InCollective {
 public:
  InCollective(MpiWatchdog& watchdog, Collective call, size_t bytes) : watchdog_(watchdog) {
    watchdog_.enter(call, static_cast<int64_t>(bytes));
  }
  ~InCollective() { watchdog_.leave(); }
  InCollective(const InCollective&) = delete;
  InCollective& operator=(const InCollective&) = delete;

 private:
  MpiWatchdog& watchdog_;
};

}  // namespace mpiddp::distributed
