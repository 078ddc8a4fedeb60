#pragma once
// What differs between the training modes, behind one small interface: how this rank's
// gradients of its part of the global batch are computed, how the ranks' gradients are
// combined, whether the step may apply, and how a set is evaluated. The loop (trainer.cpp)
// calls these in order and never asks which mode runs:
//   DataParallelStep  (data_parallel_step.cpp)  sync on: the averaged gradient, its reduction
//                                               overlapping backward on every path
//   ShardedGradientsStep (sharded_gradients_step.cpp) sync on, reduce.shard "gradients"
//                                               (ZeRO-2): each rank its part of the averaged
//                                               gradient, summed a unit at a time
//   LocalStep         (local_step.cpp)          sync off: each rank keeps its own gradient
//   ShardedParametersStep (sharded_parameters_step.cpp) reduce.shard "parameters" (ZeRO-3):
//                                               ZeRO-2, and each rank its part of the
//                                               parameters, gathered a unit at a time
//   DeterministicStep (deterministic_step.cpp)  the same bits at every world size: chunks and
//                                               exact sums (Note [deterministic mode]); with
//                                               the gradient in parts, and with the parameters
//                                               too: DeterministicGradientPartStep,
//                                               DeterministicParameterPartStep
//   FaultInjectingStep (fault_injecting_step.cpp) around one of them, with debug.* only: the
//                                               faults tests inject between the parts
// make_step_strategy (step_strategies.cpp) picks one for a config, and decides there, in one
// place, which modes combine.
#include <memory>
#include <optional>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/train/gemm_choice.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/train/batch_pipeline.hpp"
#include "mpiddp/train/replica_check.hpp"

namespace mpiddp::train {

// The slots after the P gradients of the gradient buffer, reduced with them in the same
// allreduce: the step's loss (Note [the loss rides with the gradients] in
// data_parallel_step.cpp) and each rank's stop vote (Note [stopping on a signal] in
// trainer_interrupt.cpp).
inline constexpr Index kLossSlot = 0, kStopSlot = 1, kReservedSlots = 2;

// The model's gradient buffer (P gradients and the reserved slots) as the trainer reduces it,
// so that `mpiddp bench --reduce-only` times exactly that. plan_reduction, local: the tensors
// and the reserved slots are the reducer's bucket boundaries. place_for_reduction, collective: on
// the shared-memory path the buffer moves into the reducer's shared memory, where the ranks
// sum it without copying it (Note [gradients in the shared window]).
template <typename T>
void plan_reduction(distributed::GradientReducer<T>& reducer, const nn::Model<T>& model);
template <typename T>
void place_for_reduction(distributed::GradientReducer<T>& reducer, nn::Model<T>& model);

// What a step's reduction found: the same on every rank, but for the two fields that say
// what this rank saw of its own values.
struct StepOutcome {
  double loss = 0.0;            // the mean loss over the whole global batch
  bool finite = true;           // the reduced loss and gradients are finite: the step may apply
  bool stop_requested = false;  // some rank voted to stop (Note [stopping on a signal])
  bool locally_finite = true;   // this rank's own loss and gradients, before the reduction
  bool gradients_inspected = true;  // false when an overlapped reduction hid them
};

template <typename T>
class StepStrategy {
 public:
  virtual ~StepStrategy() = default;

  // Collective, once before the first step: the library for the matrix products, the same
  // on every rank (replicas must not mix libraries, which round apart), and whatever else
  // the step needs from the other ranks.
  virtual GemmChoice start(int threads) = 0;
  // Collective here, at start before the replicas are made alike: where the model's gradient
  // buffer lies (place_for_reduction). ZeRO-2's step keeps none and does nothing (Note
  // [gradients staged by unit] in train/gradient_staging.hpp; its staging comes in start()).
  virtual void place_gradient_buffer(distributed::GradientReducer<T>& reducer, nn::Model<T>& model) {
    place_for_reduction(reducer, model);
  }
  // The compute threads of this rank: `chosen` (threads, OMP_NUM_THREADS, the cores), or
  // what the mode requires.
  virtual int threads(int chosen) const { return chosen; }
  // This rank's gradients of its `count` samples of the step into the model's gradient
  // buffer. Returns this rank's mean loss, or 0 when the loss comes out of reduce().
  virtual double compute_gradients(const Index* samples, Index count) = 0;
  // Combines the ranks' gradients into the averaged one in the model's gradient buffer (or
  // leaves each rank's own, sync off), with the global loss and the stop votes.
  virtual StepOutcome reduce(double local_loss) = 0;
  // Clips the reduced gradient to optimizer.clip_grad_norm and applies the optimizer's update
  // at learning rate lr to the parameters (optim::Optimizer::step: the norm from the
  // parts this rank holds, exact as a whole's). Returns the gradient's norm before clipping.
  // Collective when the optimizer is sharded.
  virtual double update(double lr) = 0;
  // Mean loss and accuracy over a whole set, every rank alike. Collective.
  virtual nn::EvalSums evaluate(const data::Dataset<T>& set) = 0;
  // Before an epoch's evaluations.
  virtual void before_evaluation() {}
  // ema.decay: the average of the weights takes the parameters' place for an evaluation
  // (optim::Optimizer::swap_in_average), this rank's part of the parameters kept in `kept`
  // (its optimizer part's count of values); restore_parameters puts them back, bit for bit.
  // Collective.
  virtual void swap_in_average(T* kept) = 0;
  virtual void restore_parameters(const T* kept) = 0;
  // Whether the step keeps the replicas bit-identical, so that a replica that differs is a
  // fault (sync off: each rank learns from its own shard, and they drift apart).
  virtual bool keeps_replicas_identical() const { return true; }
  // Where no rank holds all the parameters (reduce.shard "parameters"), there are no replicas
  // to compare: the replica check's report from the parts instead, its checksum that of the
  // whole parameters, gathered a unit at a time. Collective. Elsewhere nothing.
  virtual std::optional<ReplicaReport> report_from_parts() { return std::nullopt; }
  // How many transfers the trace shows in a step, given that the reducer cuts the whole
  // gradient buffer into `buckets`: those reductions, or the mode's own (ZeRO-2: one per unit
  // and micro-batch, and the loss's; ZeRO-3: those, and its gathers and their waits).
  virtual size_t communication_spans_per_step(size_t buckets) const { return buckets; }
  // What the run record says of the mode (deterministic: its chunks and pass).
  virtual void describe(io::Json& /*run_record*/) const {}
};

// What every step strategy works on: the trainer's parts, which outlive it.
template <typename T>
struct StepParts {
  const config::Config& config;
  distributed::Communicator& comm;
  BatchPipeline<T>& pipeline;
  distributed::GradientReducer<T>& reducer;
  optim::Optimizer<T>& optimizer;
  nn::StatisticsReducer& statistics;  // BatchNorm's sums over the ranks
  Index batch_per_rank;                        // b = B / N
  const data::DistributedSampler& sampler;     // this rank's samples of an epoch
};

// Whether the config's modes go together on this layout (shares_node_memory: the gradients
// lie in the node's shared memory, GradientReducer::shares_node_memory). Local; throws
// ConfigError naming the key that cannot combine. Before the optimizer is built.
void check_modes_combine(const config::Config& config, const distributed::Communicator& comm,
                         bool shares_node_memory);
// Why reduce.shard "optimizer" could not serve this config on this layout, or nothing: what
// check_modes_combine throws when it is set, and what tells whether suggesting it helps
// (memory.limit_mb's message, `mpiddp bench`'s needed_mb_by_shard). Local.
std::optional<ConfigError> optimizer_shard_refusal(const config::Config& config, const distributed::Communicator& comm,
                                                   bool shares_node_memory);
// Why the config's reduce.shard mode could not serve it on this layout, or nothing (also when
// nothing is sharded): what check_modes_combine throws, and what `mpiddp bench`'s
// needed_mb_by_shard asks of each mode. "gradients" (ZeRO-2) refuses what "optimizer" refuses,
// and more. Local.
std::optional<ConfigError> shard_refusal(const config::Config& config, const distributed::Communicator& comm,
                                         bool shares_node_memory);
// Among whom the optimizer's state (and with "gradients" the gradient) is cut for the config's
// reduce.shard on this layout (distributed::shard_scope), given where the step keeps the
// parameters: in the node's shared memory for the data-parallel steps on the shm path
// (shares_node_memory) and for deterministic mode's with the gradient in parts, each rank's
// own for deterministic mode's otherwise, whose parts are then exchanged within each node and
// not among the world's ranks. Local.
distributed::ShardScope step_shard_scope(const config::Config& config, const distributed::Communicator& comm,
                                         bool shares_node_memory, bool compressed);
// The step a config runs. Local; throws ConfigError when the batch does not fit the mode
// (a layer that needs more samples than a pass gives it).
template <typename T>
std::unique_ptr<StepStrategy<T>> make_step_strategy(const StepParts<T>& parts);

// What the config's step holds beyond the model, the optimizer and the batches, in bytes, known
// before it is built (memory.limit_mb, train/memory_plan.hpp): deterministic mode's terms and
// exact sums; 0 for the others, which work in the gradient buffer.
template <typename T>
double step_working_bytes(const config::Config& config, int world, Index parameters, Index buffer_values);

// A rank's stop vote: 1 when it has received a terminating signal, else 0, for the step's
// reduction to carry (Note [stopping on a signal]).
double stop_vote();

}  // namespace mpiddp::train
