#pragma once
// The communication interface the trainer sees. MpiCommunicator implements it over MPI;
// LocalCommunicator is the one-process implementation (every collective is the identity),
// so model, optimizer and trainer tests need no launcher.
//
// This header is MPI-free on purpose: only src/dist/mpi_*.cpp include <mpi.h>.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mpiddp::dist {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In-place element-wise sum over all ranks; every rank ends with the same result.
  virtual void allreduce_sum(float* data, size_t count) = 0;
  virtual void allreduce_sum(double* data, size_t count) = 0;
  // In-place element-wise maximum over all ranks.
  virtual void allreduce_max(double* data, size_t count) = 0;
  // Copies root's bytes to every rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // Gathers one value from each rank, in rank order, on every rank.
  virtual std::vector<uint64_t> allgather(uint64_t value) = 0;
  // Gathers one string (any bytes, any length, may differ per rank) from each rank, in
  // rank order, on every rank.
  virtual std::vector<std::string> allgather_string(const std::string& value) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job: prints "rank R: message" and never returns.
  [[noreturn]] virtual void abort(int exit_code, const std::string& message) = 0;

  // The collective watchdog (Note [the watchdog] in src/dist/mpi_watchdog.cpp): when this
  // rank waits in one collective longer than timeout_s, it reports which ranks have not
  // arrived and the step each one is at, then ends the job (abort_job) or only warns.
  // Local (the side channel was set up with the communicator); may be called again to
  // change the timeout and the action. timeout_s = 0: off.
  virtual void start_watchdog(double timeout_s, bool abort_job) = 0;
  // Makes this rank's current step known to the watchdog's reports. Cheap: call every step.
  virtual void publish_step(int64_t step) = 0;

  // The MPI library's version line ("Open MPI v4.1.4, ..."), or "none" for one process.
  virtual std::string library_version() const = 0;
  // The host this rank runs on.
  virtual std::string host_name() const = 0;
};

}  // namespace mpiddp::dist
