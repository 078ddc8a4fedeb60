#include "mpiddp/train/fault_injection.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/interrupt.hpp"

namespace mpiddp::train {

namespace {

[[noreturn]] void throw_injected(const std::string& where) {
  throw Error(kExitFailure, "injected failure (debug.fail_kind = throw) " + where);
}

// A process that vanishes without MPI_Finalize, as after a crash or exit() in a library.
[[noreturn]] void exit_injected(int rank, const std::string& where) {
  std::fprintf(stderr, "rank %d: injected exit (debug.fail_kind = exit) %s\n", rank, where.c_str());
  std::fflush(stderr);
  std::_Exit(kExitFailure);
}

// The main thread stops; the watchdog thread stays alive and answers its peers. Slept in
// pieces of at most 50 ms up to the deadline, so that a short stall_s (a test pacing every
// step of a run) lasts stall_s and not a whole piece.
void stall(const config::FaultInjection& f) {
  using clock = std::chrono::steady_clock;
  const auto until = clock::now() + std::chrono::duration_cast<clock::duration>(
                                        std::chrono::duration<double>(f.stall_s > 0 ? f.stall_s : 1e9));
  for (auto now = clock::now(); now < until; now = clock::now())
    std::this_thread::sleep_for(std::min<clock::duration>(until - now, std::chrono::milliseconds(50)));
}

}  // namespace

void inject_setup_fault(const config::FaultInjection& f, int rank) {
  if (f.rank != rank || f.step != 0) return;
  if (f.kind == "throw") throw_injected("during setup");
  if (f.kind == "exit") exit_injected(rank, "during setup");
  if (f.kind == "stall") stall(f);
}

template <typename T>
void inject_step_fault(const config::FaultInjection& f, int rank, int64_t step, T* grads) {
  const std::string where = "at step " + std::to_string(step);
  if (f.fires(rank, step, "throw")) throw_injected(where);
  if (f.fires(rank, step, "exit")) exit_injected(rank, where);
  if (f.fires(rank, step, "kill")) std::raise(SIGKILL);  // exactly what kill -9 does
  if (f.fires(rank, step, "signal") && !raise_interrupt(SIGTERM))  // as kill -TERM from outside
    throw Error(kExitFailure, "debug.fail_kind \"signal\": the SIGTERM sent " + where +
                                  " was not handled within 10 s");
  if (f.fires(rank, step, "nan")) grads[0] = std::numeric_limits<T>::quiet_NaN();
  if (f.fires(rank, step, "stall")) stall(f);
  // "huge" acts on every rank, not only fail_rank: its point is values that are finite on
  // each rank but whose sum overflows (two largest finite values add up to Inf).
  if (f.kind == "huge" && f.in_window(step)) grads[0] = std::numeric_limits<T>::max();
}

void inject_collective_fault(const config::FaultInjection& f, distributed::Communicator& comm, int64_t step) {
  if (f.fires(comm.rank(), step, "mismatch")) comm.barrier();
}

template <typename T>
void inject_update_fault(const config::FaultInjection& f, int rank, int64_t step, T* params) {
  if (f.fires(rank, step, "perturb"))
    params[0] = std::nextafter(params[0], std::numeric_limits<T>::infinity());
}

checkpoint::WriteProbes checkpoint_write_probes(const config::FaultInjection& f, int64_t step, bool best) {
  // Rank 0 writes every checkpoint; the window is every step from fail_step on, so the first
  // write at or after it is killed whatever steps the checkpoints fall on.
  checkpoint::WriteProbes probes;
  if (f.rank != 0 || step < f.step) return probes;
  const auto kill = [] { std::raise(SIGKILL); };
  if (f.kind == (best ? "kill_writing_best" : "kill_writing_checkpoint")) probes.before_rename = kill;
  if (!best && f.kind == "kill_pruning") probes.before_pruning = kill;
  return probes;
}

template void inject_step_fault<float>(const config::FaultInjection&, int, int64_t, float*);
template void inject_step_fault<double>(const config::FaultInjection&, int, int64_t, double*);
template void inject_update_fault<float>(const config::FaultInjection&, int, int64_t, float*);
template void inject_update_fault<double>(const config::FaultInjection&, int, int64_t, double*);

}  // namespace mpiddp::train
