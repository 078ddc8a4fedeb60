#pragma once
// The trainer's fault policies, as one part (docs/reliability.md): a step whose reduced loss
// or gradients are non-finite is skipped or aborts the run (on_nonfinite, max_skipped), and
// replicas the replica check finds different abort the run or are resynchronised from rank 0
// (divergence.action). Every rank decides alike: what it decides from is the same everywhere.
#include <cstdint>

#include "mpiddp/config/fault.hpp"
#include "mpiddp/core/memory.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/record/run_log_writer.hpp"
#include "mpiddp/train/replica_check.hpp"
#include "mpiddp/train/step_strategy.hpp"

namespace mpiddp::train {

template <typename T>
class StepGuard {
 public:
  // Everything given outlives the guard. log: rank 0's run log (a disabled writer elsewhere);
  // quiet: no line on stdout about replicas with sync off.
  StepGuard(const config::FaultConfig& policy, distributed::Communicator& comm, nn::Model<T>& model,
            optim::Optimizer<T>& optimizer, StepStrategy<T>& step, record::RunLogWriter& log, bool quiet);

  // A step whose reduction found a non-finite loss or gradient (StepOutcome::finite false):
  // names the ranks that saw it first (one small collective), writes the nonfinite record,
  // and returns when the step is skipped; else throws Error(kExitNonFinite) on every rank.
  void nonfinite_step(int64_t step, int64_t epoch, const StepOutcome& outcome);
  // An applied step ends a run of skipped ones.
  void step_applied() { skipped_in_a_row_ = 0; }
  // The replica check at `step` (collective); at_end: the run's last, which with sync off says
  // how far the replicas drifted. Replicas that differ while the step keeps them identical abort
  // (Error(kExitDivergence)) or are resynchronised. report, when given: the check's, after a
  // resync the second check's.
  void verify_replicas(int64_t step, bool at_end, ReplicaReport* report);

  int64_t skipped_steps() const { return skipped_total_; }
  int64_t resyncs() const { return resyncs_; }

 private:
  // Rank 0's replica becomes everyone's: parameters, buffers and optimizer state. Collective.
  void resynchronize();

  const config::FaultConfig& policy_;
  distributed::Communicator& comm_;
  nn::Model<T>& model_;
  optim::Optimizer<T>& optimizer_;
  StepStrategy<T>& step_;
  record::RunLogWriter& log_;
  bool quiet_;
  int64_t skipped_in_a_row_ = 0, skipped_total_ = 0, resyncs_ = 0;
  nn::AlignedVector<T> replica_scratch_;  // (min(P, 256 Ki)) rank 0's parameters, piece by piece
};

}  // namespace mpiddp::train
