// What one rank will hold, by kind (include/mpiddp/train/memory_plan.hpp).
#include "mpiddp/train/memory_plan.hpp"

#include <cstdio>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/train/step_strategy.hpp"

namespace mpiddp::train {

namespace {

MemoryLayout memory_layout(const config::Config& config, distributed::Communicator& comm,
                           distributed::ShardScope scope, bool compressed, size_t value_bytes) {
  MemoryLayout layout;
  layout.optimizer_parts = distributed::part_exchange(comm, scope)->parts();
  // Checkpoints in parts are written by each rank from its own part (checkpoint_parts.hpp).
  const bool writes_state = (!config.checkpoint.dir.empty() && config.checkpoint.format == "file") ||
                            (config.optimizer.ema_decay > 0.0 && !config.save_weights.empty());
  layout.gathers_whole_state = layout.optimizer_parts > 1 && writes_state;
  layout.gradients_in_parts = config.reduce.shard_gradients;
  layout.gradient_part_only = config.reduce.shard_gradients && config.deterministic.enabled;
  layout.parameters_in_parts = config.reduce.shard_parameters;
  const int world = comm.size();
  if (compressed) layout.reduction_bytes_per_value += 4.0;
  // The scattered sum's receive buffers: between nodes only (on one node the ranks sum in the
  // node's shared memory, in place).
  if (scope == distributed::ShardScope::kWorld && comm.ranks_on_node() < world)
    layout.reduction_bytes_per_value += static_cast<double>(value_bytes) * (world - 1) / world;
  return layout;
}

}  // namespace

MemoryNeed memory_need_in_scope(const config::Config& config, distributed::Communicator& comm,
                                distributed::ShardScope scope, bool compressed, const MemoryFacts& facts) {
  return memory_need(config.optimizer, config.prefetch, facts,
                     memory_layout(config, comm, scope, compressed, facts.value_bytes));
}

MemoryNeed memory_need(const optim::OptimizerConfig& optimizer, bool prefetch, const MemoryFacts& facts,
                       const MemoryLayout& layout) {
  const double value = static_cast<double>(facts.value_bytes);
  const double p = static_cast<double>(facts.parameters);
  const double gradients = static_cast<double>(facts.gradient_values);
  const double whole_state = optim::state_values_per_parameter(optimizer) * p * value;
  MemoryNeed need;
  // The largest part (the first: optim::part_begin rounds the parts up to whole lines), and the
  // staging: of the gradients by unit, and of the parameters gathered by unit, planned alike.
  const double part = static_cast<double>(optim::part_begin(facts.parameters, layout.optimizer_parts, 1, facts.value_bytes));
  const double staging = static_cast<double>(facts.staging_values);
  // ZeRO-3: the model is built holding its part alone, and a placeholder of the largest unit's
  // parameters until the step binds the units' staging (the two coexist for a moment at the
  // step's start: not counted, less than a slot).
  need.parameters = (layout.parameters_in_parts ? (part + staging) * value : p * value) +
                    static_cast<double>(facts.weight_copy_bytes);
  if (layout.gradients_in_parts && !layout.gradient_part_only) {
    // The gradients' staging ends with the loss and stop slots. Between nodes the sums in
    // flight (at most the staging's) receive the others' shares of this rank's part of them.
    const double gradient_staging = staging + static_cast<double>(kReservedSlots);
    need.gradients = (part + gradient_staging) * value + gradient_staging * layout.reduction_bytes_per_value;
  } else if (layout.gradients_in_parts) {
    need.gradients = part * value;  // the part of the exact mean, where the whole buffer would hold it
  } else {
    need.gradients = gradients * value + gradients * layout.reduction_bytes_per_value;
  }
  need.optimizer_state = whole_state / layout.optimizer_parts + (layout.gathers_whole_state ? whole_state : 0.0);
  // With prefetch the worker gathers the next batch beside the step's.
  need.activations = static_cast<double>(facts.activation_bytes) +
                     (prefetch ? 2.0 : 1.0) * static_cast<double>(facts.batch_bytes);
  need.data = static_cast<double>(facts.data_bytes);
  need.step = facts.step_bytes;
  return need;
}

double mebibytes(double bytes) { return bytes / (1024.0 * 1024.0); }

io::Json memory_record(const MemoryNeed& need, double limit_mb) {
  io::Json record = {{"needed_mb", mebibytes(need.total())},
                     {"by_kind", {{"parameters", mebibytes(need.parameters)},
                                  {"gradients", mebibytes(need.gradients)},
                                  {"optimizer_state", mebibytes(need.optimizer_state)},
                                  {"activations", mebibytes(need.activations)},
                                  {"data", mebibytes(need.data)},
                                  {"step", mebibytes(need.step)}}}};
  if (limit_mb > 0.0) record["limit_mb"] = limit_mb;
  return record;
}

void check_memory_limit(double limit_mb, const MemoryNeed& need, bool shardable) {
  const double needed = mebibytes(need.total());
  if (limit_mb <= 0.0 || needed <= limit_mb) return;
  char text[512];
  std::snprintf(text, sizeof text,
                "is %.1f MiB per rank, but this run needs %.1f MiB per rank (parameters %.1f, gradients %.1f, "
                "optimizer state %.1f, activations %.1f, data %.1f, step %.1f)",
                limit_mb, needed, mebibytes(need.parameters), mebibytes(need.gradients),
                mebibytes(need.optimizer_state), mebibytes(need.activations), mebibytes(need.data),
                mebibytes(need.step));
  std::string message = text;
  if (shardable && need.optimizer_state > 0.0)
    message += "; reduce.shard \"optimizer\" divides the optimizer state among the ranks (\"gradients\" the "
               "gradients too)";
  message += "; a smaller batch or model needs less";
  throw ConfigError("memory.limit_mb", message);
}

}  // namespace mpiddp::train
