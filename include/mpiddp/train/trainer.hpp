#pragma once
// The data-parallel trainer: every rank runs this same loop on its own shard.
//
// One step (see docs/design.md, "One step, file by file"):
//   1. the sampler gives this rank its b = B/N samples of global batch k;
//   2. the step strategy (step_strategy.hpp) computes this rank's gradients of them;
//   3. it combines the ranks' gradients: summed and divided by N by the reducer
//      (distributed/gradient_reducer), exactly in deterministic mode, not at all with sync off;
//   4. every rank applies the same optimizer step to the same averaged gradient.
//
// Where each part lives, in src/train/:
//   trainer.cpp               the run() loop: epochs and steps
//   trainer_step.cpp          one step: the strategy's parts in order, then the update
//   step_guard.cpp            non-finite steps, replica divergence (StepGuard: its own part)
//   trainer_start.cpp         start(): the collective start-up, the handshake, the run's facts
//                             for the run record (src/record/run_record.cpp: the log and the
//                             run's own records, RunRecord: its own part)
//   evaluator.cpp             evaluations (eval.every_steps', the epoch's), the best checkpoint,
//                             early stopping (Evaluator: its own part)
//   trainer_setup.cpp         the constructor (local setup, config checks), plan_reduction
//   checkpointer.cpp          the initial state, checkpoints and final weights (Checkpointer)
//   trainer_interrupt.cpp     the stop on SIGTERM/SIGINT/SIGUSR1
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/distributed/statistics_reducer.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/train/gemm_choice.hpp"
#include "mpiddp/train/memory_plan.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/train/replica_check.hpp"
#include "mpiddp/checkpoint/restart.hpp"
#include "mpiddp/data/sample_order.hpp"
#include "mpiddp/record/step_profile.hpp"
#include "mpiddp/train/step_guard.hpp"
#include "mpiddp/train/step_strategy.hpp"
#include "mpiddp/train/checkpointer.hpp"
#include "mpiddp/train/evaluator.hpp"
#include "mpiddp/record/run_record.hpp"
#include "mpiddp/record/step_observer.hpp"
#include "mpiddp/record/step_trace.hpp"

namespace mpiddp::train {

struct TrainOptions {
  bool quiet = false;            // no table on stdout, no progress line on stderr
  std::string launcher = "none";  // for the run record: distributed::detect_launcher()
  // --resume: "" (start afresh), "latest", "auto" (latest if there is one, else afresh), a
  // checkpoint or a directory
  std::string resume{};
  // --restart: this run is a launcher's restart of a failed or interrupted attempt; its log
  // carries on the previous attempt's and says why (a `restart` record).
  std::optional<checkpoint::RestartInfo> restart{};
  record::StepProfile* profile = nullptr;  // when set, filled with step timings of epochs 2..last
  // Keep every step's loss and every epoch's result in RunResult (for tests and library
  // callers). The command line turns it off so that memory stays flat however long the run.
  bool keep_history = true;
};

struct RunResult {
  std::vector<EpochResult> epochs;  // empty unless TrainOptions::keep_history
  std::vector<EvaluationResult> evaluations;  // eval.every_steps'; empty unless keep_history
  int64_t early_stop_step = 0;  // the step after which early stopping ended the run; 0: it did not
  std::vector<double> step_losses;  // global mean loss of each step; empty unless keep_history
  int64_t steps = 0;
  int64_t skipped_steps = 0;  // non-finite steps skipped (on_nonfinite = skip)
  int64_t resyncs = 0;        // replica divergences repaired (divergence.action = resync)
  ReplicaReport replicas;
  double time_s = 0.0;
};

// A run whose setup is done (data loaded, model built) and which has not yet called any
// collective. Setup is local on purpose: a rank that fails there can tell the others in
// one agreed collective (see src/tools/train_command.cpp) instead of leaving them waiting.
class TrainingRun {
 public:
  virtual ~TrainingRun() = default;
  virtual RunResult run() = 0;
};

// The training set and how this rank walks it: its samples of each epoch (DistributedSampler
// semantics), b = B / N of them a step, in sampler.order's order when one is given.
template <typename T>
struct TrainingData {
  TrainingData(const config::Config& config, const distributed::Communicator& comm);
  data::Dataset<T> set;  // data.train
  data::DistributedSampler sampler;
  Index batch_per_rank;
  std::optional<data::SampleOrder> order;  // sampler.order, read by start() (a collective)
};

// What this rank's replica is made of: the model and its loss, the optimizer (whole, or this
// rank's part: reduce.shard_optimizer), what combines the replica's sums with the other ranks'
// (the gradients' reducer, BatchNorm's statistics), and the batch pipeline that feeds it. The
// step strategy works on these (StepParts).
template <typename T>
struct Replica {
  Replica(distributed::Communicator& comm, const distributed::ReduceConfig& reduce) : reducer(comm, reduce), statistics(comm) {}
  std::unique_ptr<nn::Model<T>> model;
  std::unique_ptr<nn::Loss<T>> loss;
  std::unique_ptr<optim::Optimizer<T>> optimizer;
  distributed::GradientReducer<T> reducer;
  distributed::CommunicatorStatistics statistics;  // BatchNorm's sums over the ranks
  std::unique_ptr<BatchPipeline<T>> pipeline;      // the batch buffers, forward and backward
};

template <typename T>
class Trainer final : public TrainingRun {
 public:
  // Local work only, no collective (see TrainingRun).
  Trainer(const config::Config& config, distributed::Communicator& comm, TrainOptions options = {});

  RunResult run() override;

  // The pieces of one step, public so tests can check them in isolation.
  // Forward and backward on the given samples of the training set: leaves this rank's
  // gradient of its mean loss in model().gradients() and returns that loss (0 in
  // deterministic mode, whose loss comes out of the reduction). With accumulate_steps K,
  // the samples go through in K micro-batches whose gradients add up to that of the mean
  // loss over all of them. With reduce.overlap, the reduction of each bucket starts during
  // backward; synchronize() must follow, on every rank.
  double compute_gradients(const Index* samples, Index count) {
    return step_->compute_gradients(samples, count);
  }
  // Averages the gradients over ranks (and, riding along, the loss). Returns the global loss.
  double synchronize(double local_loss) { return step_->reduce(local_loss).loss; }

  nn::Model<T>& model() { return *replica_.model; }
  const data::Dataset<T>& train_set() const { return data_.set; }
  // The optimizer, whole or this rank's part of it (reduce.shard_optimizer).
  const optim::Optimizer<T>& optimizer() const { return *replica_.optimizer; }
  // What this rank holds by kind (memory_plan.hpp), checked against memory.limit_mb before
  // the model was built, and what that followed from.
  const MemoryFacts& memory_facts() const { return memory_facts_; }
  const MemoryNeed& memory_need() const { return memory_need_; }
  // The epoch (0-based) and step that compute_gradients' training pass belongs to: dropout's
  // masks depend on them. run() sets them before each step.
  void set_pass(int64_t epoch, int64_t step) {
    replica_.pipeline->training_pass().epoch = epoch;
    replica_.pipeline->training_pass().step = step;
  }

 private:
  // What one step did: the global loss, and whether the update was applied (a non-finite
  // step skipped with on_nonfinite = skip was not).
  struct StepDone {
    double loss = 0.0;
    bool applied = true;
  };
  // Defined in trainer_step.cpp: step `step` of epoch `epoch` (1-based) on this rank's
  // `count` samples, from gradients to update and the step record.
  StepDone train_step(int64_t epoch, int64_t step, const Index* samples, Index count,
                      int64_t total_steps);
  // After the last step: the final replica check, the weights, the trace, the end record, and
  // what result holds of them.
  void finish_run(int64_t step, std::chrono::steady_clock::time_point run_start, RunResult& result);
  void start();
  // Defined in trainer_interrupt.cpp (Note [stopping on a signal]): the stop of every rank
  // together, which never returns.
  [[noreturn]] void stop_for_interrupt(const checkpoint::TrainingPosition& resume_at);
  // The checkpointer's checkpoint of `position` with the evaluator's state. Every rank calls
  // it (collective when the optimizer is sharded). best: the best checkpoint
  // (checkpoint.keep_best) rather than the next in the series.
  void save_checkpoint(checkpoint::TrainingPosition position, bool best = false);
  // sampler.order's order of epoch `epoch` (0-based), or null.
  const std::vector<Index>* replay_order(int64_t epoch) const { return data_.order ? &data_.order->epoch(epoch) : nullptr; }
  // Defined in trainer_trace.cpp: the trace's memory and common time origin (before the
  // first step), and the merged file at the end (collective).
  void start_trace(int64_t total_steps);
  void finish_trace();

  const config::Config& config_;
  distributed::Communicator& comm_;
  TrainOptions options_;
  TrainingData<T> data_;
  Replica<T> replica_;
  record::StepObserver observer_;  // the profile and the trace: the steps' laps and spans
  int threads_ = 1;                // compute threads of this rank (core/threads.hpp)
  MemoryFacts memory_facts_;       // what this rank's memory need follows from
  MemoryNeed memory_need_;         // what this rank holds, by kind
  GemmChoice gemm_;                // rank 0's reasons; every rank's backend
  std::unique_ptr<StepStrategy<T>> step_;      // what this run's mode does in a step
  std::unique_ptr<record::RunRecord> record_;  // log.path, log.csv, log.tensorboard (rank 0) and the run's records
  checkpoint::TrainingPosition position_;      // where run() starts (set by start())
  bool stop_requested_ = false;  // the last reduction carried some rank's stop vote
  std::unique_ptr<Checkpointer<T>> checkpointer_;  // where the state comes from, what is written
  std::unique_ptr<Evaluator<T>> evaluator_;  // evaluations, the best checkpoint, early stopping
  std::unique_ptr<StepGuard<T>> guard_;  // non-finite steps, replica checks (built after record_)
};

// compute.isa: caps this process's kernels at the level (kernels/isa.hpp), or uncaps them
// for "auto"; a level the CPU lacks is a ConfigError naming the key and the missing features.
// The trainer's constructor calls it first.
void apply_compute_isa(const std::string& configured);
// compute.precision: every float product of this process from now on in that precision
// (kernels/precision.hpp). "bf16" where the CPU (or compute.isa's cap) lacks AVX512_BF16, or the
// build lacks oneDNN, is a ConfigError naming the key, what is missing and bf16_reference: a
// slow emulation in its place would be a trap. Called after apply_compute_isa.
void apply_compute_precision(const std::string& configured);

// Builds the trainer for config.dtype (local setup only, see TrainingRun).
std::unique_ptr<TrainingRun> prepare_training(const config::Config& config, distributed::Communicator& comm,
                                              TrainOptions options = {});
// prepare_training, then run.
RunResult run_training(const config::Config& config, distributed::Communicator& comm, TrainOptions options = {});

}  // namespace mpiddp::train
