#pragma once
// The data-parallel trainer: every rank runs this same loop on its own shard.
//
// One step (see docs/design.md):
//   1. the sampler gives this rank its b = B/N samples of global batch k;
//   2. forward and backward on them give the gradient of this rank's mean loss;
//   3. the reducer sums the gradients over ranks and divides by N (distributed/gradient_reducer);
//   4. every rank applies the same optimizer step to the same averaged gradient.
//
// Where each part lives, in src/train/:
//   trainer.cpp               the run() loop: epochs and steps, calling the pieces below
//   trainer_step.cpp          one step: gather, compute_gradients, synchronize, step_is_finite
//   trainer_faults.cpp        non-finite steps, replica divergence (verify_replicas, resync)
//   trainer_report.cpp        start() (handshake, run record), evaluate and finish_epoch
//   trainer_setup.cpp         the constructor (local setup, config checks), plan_reduction
//   trainer_checkpointing.cpp the initial state, checkpoints and final weights
//   trainer_interrupt.cpp     the stop on SIGTERM/SIGINT/SIGUSR1 and a restarted attempt's log
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
#include "mpiddp/io/jsonl_log.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/sequential.hpp"
#include "mpiddp/train/gemm_choice.hpp"
#include "mpiddp/train/optimizer_shard.hpp"
#include "mpiddp/train/config.hpp"
#include "mpiddp/train/checkpoint.hpp"
#include "mpiddp/train/deterministic_step.hpp"
#include "mpiddp/train/replica_check.hpp"
#include "mpiddp/train/restart.hpp"
#include "mpiddp/train/sample_order.hpp"
#include "mpiddp/train/step_profile.hpp"
#include "mpiddp/train/step_trace.hpp"

namespace mpiddp::train {

// The slots after the P gradients of the gradient buffer, reduced with them in the same
// allreduce: the step's loss (Note [the loss rides with the gradients] in trainer_step.cpp)
// and each rank's stop vote (Note [stopping on a signal] in trainer_interrupt.cpp).
inline constexpr Index kLossSlot = 0, kStopSlot = 1, kReservedSlots = 2;

struct TrainOptions {
  bool quiet = false;            // no table on stdout, no progress line on stderr
  std::string launcher = "none";  // for the run record: distributed::detect_launcher()
  // --resume: "" (start afresh), "latest", "auto" (latest if there is one, else afresh), a
  // checkpoint or a directory
  std::string resume{};
  // --restart: this run is a launcher's restart of a failed or interrupted attempt; its log
  // carries on the previous attempt's and says why (a `restart` record).
  std::optional<RestartInfo> restart{};
  StepProfile* profile = nullptr;  // when set, filled with step timings of epochs 2..last
  // Keep every step's loss and every epoch's result in RunResult (for tests and library
  // callers). The command line turns it off so that memory stays flat however long the run.
  bool keep_history = true;
};

struct EpochResult {
  int64_t epoch = 0;          // 1-based
  double eval_loss = 0.0;     // over data.eval when configured, else over the training set
  std::optional<double> eval_accuracy;  // classification only
  double train_loss = 0.0;    // over the whole training set, after the epoch's updates
  double time_s = 0.0;
  double samples_per_s = 0.0;
};

struct RunResult {
  std::vector<EpochResult> epochs;  // empty unless TrainOptions::keep_history
  std::vector<double> step_losses;  // global mean loss of each step; empty unless keep_history
  int64_t steps = 0;
  int64_t skipped_steps = 0;  // non-finite steps skipped (on_nonfinite = skip)
  int64_t resyncs = 0;        // replica divergences repaired (divergence.action = resync)
  ReplicaReport replicas;
  double time_s = 0.0;
};

// A run whose setup is done (data loaded, model built) and which has not yet called any
// collective. Setup is local on purpose: a rank that fails there can tell the others in
// one agreed collective (see tools/train_command.cpp) instead of leaving them waiting.
class TrainingRun {
 public:
  virtual ~TrainingRun() = default;
  virtual RunResult run() = 0;
};

template <typename T>
class Trainer final : public TrainingRun {
 public:
  // Local work only, no collective (see TrainingRun).
  Trainer(const Config& config, distributed::Communicator& comm, TrainOptions options = {});

  RunResult run() override;

  // The pieces of one step, public so tests can check them in isolation.
  // Forward and backward on the given samples of the training set: zeroes the gradients,
  // then leaves this rank's gradient of its mean loss in model().gradients(). Returns that loss.
  // With accumulate_steps K, the samples go through in K micro-batches whose gradients add
  // up to that of the mean loss over all of them. With start_sync, the reduction of each
  // bucket starts during backward; synchronize() must follow, on every rank.
  double compute_gradients(const Index* samples, Index count, bool start_sync = false);
  // Averages the gradients over ranks (and, riding along, the loss). Returns the global loss.
  double synchronize(double local_loss);
  // True when the step's reduced loss and gradients are finite: the same answer on every
  // rank, without communication (Note [non-finite steps are decided together]; across the
  // leaders, from synchronize's verdict, Note [the step's verdict from scattered gradients]).
  bool step_is_finite(double loss) const;

  nn::Sequential<T>& model() { return *model_; }
  const data::Dataset<T>& train_set() const { return train_; }
  // The optimizer, whole or this rank's part of it (reduce.shard_optimizer).
  const OptimizerShard<T>& optimizer() const { return *optimizer_; }
  // The epoch (0-based) and step that compute_gradients' training pass belongs to: dropout's
  // masks depend on them. run() sets them before each step.
  void set_pass(int64_t epoch, int64_t step) {
    training_pass_.epoch = epoch;
    training_pass_.step = step;
  }

 private:
  void gather(const data::Dataset<T>& set, const Index* samples, Index count);
  // Deterministic mode (trainer_deterministic.cpp): the setup (local, in the constructor), its
  // collective part (the library and the pass, from select_gemm in start()), and the forms of
  // compute_gradients, synchronize and evaluate that give the same bits at every world size.
  void setup_deterministic();
  void start_deterministic();
  double compute_chunk_gradients(const Index* samples, Index count);
  void pass_chunk_by_chunk(const Index* samples, Index size);
  void pass_chunks_together(const Index* samples, Index size);
  double synchronize_chunks();
  double synchronize_grid();
  nn::EvalSums evaluate_in_blocks(const data::Dataset<T>& set);
  nn::EvalSums evaluate(const data::Dataset<T>& set);
  EpochResult finish_epoch(int64_t epoch, double seconds, Index samples_seen);
  void verify_replicas(int64_t step, bool at_end, RunResult* result);
  void resynchronize();
  double unsynchronized_loss(double local_loss);
  void share_scattered_verdict();
  void handle_nonfinite_step(int64_t step, int64_t epoch);
  void start();
  // The library for the matrix products: rank 0 decides, every rank follows (a collective).
  void select_gemm();
  // Defined in trainer_interrupt.cpp (Note [stopping on a signal]): 1 when this rank has
  // received a terminating signal, else 0, for the step's reduction to carry; then the stop
  // of every rank together, which never returns; and rank 0's first records of the log.
  T stop_vote() const;
  [[noreturn]] void stop_for_interrupt(const TrainingPosition& resume_at);
  void open_log(const Json& run_record, const std::vector<std::string>& hosts);
  // {"path", "epoch", "batch", "step"} of the checkpoint this run resumed from.
  Json resume_point() const;
  // Rank 0's buffers (BatchNorm's running statistics) become every rank's.
  void broadcast_buffers();
  // Defined in trainer_checkpointing.cpp: where the parameters and optimizer state come
  // from (a checkpoint, init.weights or the seed), and what is written at the end.
  TrainingPosition initial_state();
  // Every rank calls it (collective when the optimizer is sharded); rank 0 writes.
  void save_checkpoint(const TrainingPosition& position);
  // Rank 0's part: the file from the whole optimizer state, and its log record.
  void write_checkpoint_file(const TrainingPosition& position, optim::Optimizer<T>& optimizer,
                             std::chrono::steady_clock::time_point start);
  void save_final_weights();
  RunIdentity identity() const;
  const std::vector<Index>* replay_order(int64_t epoch) const;
  // Defined in trainer_trace.cpp: the trace's memory and common time origin (before the
  // first step), and the merged file at the end (collective).
  void start_trace(int64_t total_steps);
  void finish_trace();

  // Hands backward's "gradients ready" calls to the reducer.
  struct ReadyForwarder final : nn::GradientListener {
    distributed::GradientReducer<T>* reducer = nullptr;
    void gradients_ready(Index offset) override { reducer->ready_from(static_cast<size_t>(offset)); }
  };

  const Config& config_;
  distributed::Communicator& comm_;
  TrainOptions options_;
  data::Dataset<T> train_;
  std::optional<data::Dataset<T>> eval_;
  std::unique_ptr<nn::Sequential<T>> model_;
  std::unique_ptr<nn::Loss<T>> loss_;
  std::unique_ptr<OptimizerShard<T>> optimizer_;  // whole, or this rank's part (reduce.shard_optimizer)
  distributed::GradientReducer<T> reducer_;
  ReadyForwarder ready_forwarder_;
  StepTrace trace_;              // trace.path: the selected steps' spans
  StepTrace* traced_ = nullptr;  // &trace_ during a selected step, else null (the one test)
  PhaseClock phases_;            // the step's laps: compute_gradients, synchronize, run()
  distributed::CommunicatorStatistics statistics_;  // BatchNorm's sums over the ranks
  // The training pass's context: seed, epoch, step and, with batchnorm.sync on several
  // ranks, statistics_; compute_gradients points it at each micro-batch's positions.
  nn::PassContext training_pass_;
  // batchnorm.sync off: rank 0's buffers go to every rank before each step (PyTorch DDP's
  // broadcast_buffers), as the ranks' shard statistics would otherwise drift apart.
  bool broadcast_buffers_each_step_ = false;
  bool sync_started_ = false;  // compute_gradients began the reduction, synchronize finishes it
  int threads_ = 1;            // compute threads of this rank (core/threads.hpp)
  GemmChoice gemm_;            // rank 0's reasons; every rank's backend
  data::DistributedSampler sampler_;
  Index batch_per_rank_;
  std::unique_ptr<io::JsonlLog> log_;
  std::optional<SampleOrder> order_;  // sampler.order, when set
  TrainingPosition position_;         // where run() starts (set by start())
  std::string resumed_from_;          // the checkpoint's path, when resuming
  bool locally_finite_ = true;   // this rank's own loss and gradients, before the reduction
  bool gradients_inspected_ = true;  // false when an overlapped reduction hid them (see synchronize)
  // What the reduction's sums saw of the summed values, alike on every rank (nullopt: it
  // could not tell, step_is_finite scans the buffer).
  std::optional<bool> sums_finite_;
  bool scattered_parts_finite_ = true;  // across the leaders: every rank's part (share_scattered_verdict)
  bool stop_requested_ = false;  // the last reduction carried some rank's stop vote
  int64_t last_checkpoint_step_ = -1;  // the step of the last checkpoint written, -1: none
  int64_t skipped_in_a_row_ = 0, skipped_total_ = 0, resyncs_ = 0;

  // Step buffers, allocated once.
  nn::AlignedVector<T> batch_x_;         // (features, b)
  nn::AlignedVector<T> batch_y_;         // (outputs, b), regression
  std::vector<int32_t> batch_labels_;    // (b), classification
  nn::AlignedVector<T> replica_scratch_; // (min(P, 256 Ki)) rank 0's parameters, piece by piece
  std::vector<Index> eval_chunk_;        // (b) sample indices of one evaluation chunk
  // (b) the position of this rank's j-th sample inside the step's global batch: N j + r
  // (data/sampler.hpp), the same sample at every world size.
  std::vector<Index> positions_;
  std::unique_ptr<DeterministicStep<T>> deterministic_;  // null unless config.deterministic
};

// Builds the trainer for config.dtype (local setup only, see TrainingRun).
std::unique_ptr<TrainingRun> prepare_training(const Config& config, distributed::Communicator& comm,
                                              TrainOptions options = {});
// prepare_training, then run.
RunResult run_training(const Config& config, distributed::Communicator& comm, TrainOptions options = {});

// The model's gradient buffer (P gradients and the reserved slots) as the trainer reduces it,
// so that `mpiddp bench --reduce-only` times exactly that. plan_reduction, local: the tensors
// and the reserved slots are the reducer's bucket boundaries. place_for_reduction, collective: on
// the shared-memory path the buffer moves into the reducer's shared memory, where the ranks
// sum it without copying it (Note [gradients in the shared window]).
template <typename T>
void plan_reduction(distributed::GradientReducer<T>& reducer, const nn::Sequential<T>& model);
template <typename T>
void place_for_reduction(distributed::GradientReducer<T>& reducer, nn::Sequential<T>& model);

}  // namespace mpiddp::train
