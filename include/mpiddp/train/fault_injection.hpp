#pragma once
// Fault injection (debug.* in the config): a testing aid, never used in production runs.
// The trainer calls these at fixed points; each does nothing unless debug.fail_rank is this
// rank and the step is one of the failing steps. docs/reliability.md lists what each kind
// simulates and the test that uses it.
#include <cstdint>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/config/fault.hpp"

namespace mpiddp::train {

// During setup (debug.fail_step = 0), before any collective: throw | exit | stall.
void inject_setup_fault(const config::FaultInjection& f, int rank);

// After backward, before the gradients are reduced: throw | nan | stall | exit | kill | signal
// (SIGTERM to this process: the stop at the step boundary, Note [stopping on a signal]).
// grads: (P) this rank's gradients; nan poisons the first one.
template <typename T>
void inject_step_fault(const config::FaultInjection& f, int rank, int64_t step, T* grads);

// Right before the gradients are reduced: mismatch makes this rank enter a barrier where
// every other rank enters the gradient sum (a code path that diverged between ranks), so the
// job hangs in mismatched collectives of the same number until the watchdog ends it.
void inject_collective_fault(const config::FaultInjection& f, distributed::Communicator& comm, int64_t step);

// After the optimizer step: perturb moves this rank's first parameter by one ulp, the
// smallest possible replica divergence.
template <typename T>
void inject_update_fault(const config::FaultInjection& f, int rank, int64_t step, T* params);

// The crash points of a checkpoint write at `step` on rank 0 (kill_writing_checkpoint,
// kill_writing_best, kill_pruning): each raises SIGKILL there, as kill -9 from outside would.
// best: the write is the best checkpoint's (checkpoint.keep_best).
checkpoint::WriteProbes checkpoint_write_probes(const config::FaultInjection& f, int64_t step, bool best);

}  // namespace mpiddp::train
