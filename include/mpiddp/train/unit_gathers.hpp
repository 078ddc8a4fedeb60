#pragma once
// The parameters of reduce.shard "parameters" (ZeRO-3) gathered a unit at a time from their
// owners' parts, with the prefetch of the next unit (Note [parameters gathered by unit] in
// train/sharded_parameters_step.hpp): what every step that keeps only its part of the
// parameters calls from its layer hooks, whether its gradients are summed a unit at a time
// (ShardedParametersStep) or exactly over the chunks (DeterministicParameterPartStep).
// Every rank must make the same calls in the same order: each gather is a collective.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/layer_hooks.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/record/step_trace.hpp"
#include "mpiddp/train/gradient_staging.hpp"
#include "mpiddp/train/replica_check.hpp"

namespace mpiddp::train {

template <typename T>
class UnitGathers {
 public:
  // plan: the units and their staging (the gradients' plan, plan_gradient_staging), which
  // outlives this; the parts are the optimizer's.
  UnitGathers(distributed::Communicator& comm, optim::Optimizer<T>& optimizer, const GradientStaging& plan);

  // Collective-free, once at start: the model, built holding the optimizer's part alone, reads
  // its units' parameters from the staging from now on. Throws otherwise.
  void bind(nn::Model<T>& model);
  // From the layer hooks, for a layer that is one of the plan's units (nothing for another):
  // before its forward its parameters arrive, and the next unit's start travelling; before its
  // backward they arrive, and the unit before it starts travelling.
  void before_forward(const nn::LayerUnit& layer);
  void before_backward(const nn::LayerUnit& layer);
  // Every unit gathered: a pass over the whole model (an evaluation round without a batch of
  // this rank's, while the other ranks' passes gather every unit).
  void gather_all();
  // Every unit's parameters on their way arrive (before the parts change).
  void wait_all();
  // The parts have changed: no unit's gathered parameters are current.
  void forget();
  // What changes this rank's part of the parameters, after every unit on its way has arrived;
  // then no unit's gathered copy is current. The optimizer's update of the part from its part
  // of the averaged gradient (returns the gradient's norm), and ema's average in the part's
  // place and back (optim::Optimizer's *_part). Collective where the optimizer's are.
  double update_part(const T* part_gradients, double lr);
  void swap_in_average(T* kept);
  void restore_parameters(const T* kept);
  // The replica check's report from the parts: the fnv1a hash of all P parameters, gathered a
  // unit at a time (the units lie one after another and cover [0, P), so the hash chained
  // through them is the whole buffer's). Collective.
  ReplicaReport replica_report();
  // What the run record says of the staging (parameter_staging), unit: reduce.shard_unit.
  void describe(io::Json& run_record, const std::string& unit) const;
  // Gathers and their waits go into `trace` (record/step_trace.hpp) from now on; null: none.
  void trace_into(record::StepTrace* trace) { trace_ = trace; }

 private:
  enum class Gathered : char { kNo, kTravelling, kYes };
  using Clock = std::chrono::steady_clock;

  // The unit's parameters, in its staging: gathered now, or waited for if on their way.
  void ensure_gathered(size_t unit);
  // Starts the unit's gather into its staging (its slot's last unit is done with it).
  void start_gather(size_t unit);
  T* staging_of(const GradientStaging::Unit& unit) { return staging_.data() + plan_.begin_of(unit); }

  distributed::Communicator& comm_;
  optim::Optimizer<T>& optimizer_;
  const GradientStaging& plan_;
  nn::Model<T>* model_ = nullptr;                      // once bound: its parameter_part() is this rank's
  nn::AlignedVector<T> staging_;                       // (staging values) the slots, then the pinned units
  std::vector<std::vector<size_t>> unit_byte_begins_;  // (units) (parts + 1) the parts within each unit, in bytes
  std::vector<Gathered> gathered_;                     // (units)
  std::vector<int> handle_;                            // (units) while travelling
  std::vector<Clock::time_point> started_;             // (units) when each gather began
  record::StepTrace* trace_ = nullptr;                 // a traced step's, else null
  int slot_holder_[2] = {-1, -1};                      // the unit whose parameters each slot holds, or -1
};

}  // namespace mpiddp::train
