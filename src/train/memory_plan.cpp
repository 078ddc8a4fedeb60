// What one rank will hold, by kind (include/mpiddp/train/memory_plan.hpp).
#include "mpiddp/train/memory_plan.hpp"

#include <cstdio>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::train {

MemoryLayout memory_layout(distributed::Communicator& comm, distributed::ShardScope scope, bool shares_node_memory) {
  MemoryLayout layout;
  layout.optimizer_parts = distributed::part_exchange(comm, scope)->parts();
  if (scope != distributed::ShardScope::kNone && shares_node_memory) layout.parameter_sharers = comm.ranks_on_node();
  return layout;
}

MemoryNeed memory_need(const optim::OptimizerConfig& optimizer, bool prefetch, const MemoryFacts& facts,
                       const MemoryLayout& layout) {
  const double value = static_cast<double>(facts.value_bytes);
  const double p = static_cast<double>(facts.parameters);
  MemoryNeed need;
  need.parameters = p * value / layout.parameter_sharers;
  need.gradients = static_cast<double>(facts.gradient_values) * value;
  need.optimizer_state = optim::state_values_per_parameter(optimizer) * p * value / layout.optimizer_parts;
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
                "is %.0f MiB per rank, but this run needs %.0f MiB per rank (parameters %.0f, gradients %.0f, "
                "optimizer state %.0f, activations %.0f, data %.0f, step %.0f)",
                limit_mb, needed, mebibytes(need.parameters), mebibytes(need.gradients),
                mebibytes(need.optimizer_state), mebibytes(need.activations), mebibytes(need.data),
                mebibytes(need.step));
  std::string message = text;
  if (shardable && need.optimizer_state > 0.0)
    message += "; reduce.shard \"optimizer\" divides the optimizer state among the ranks";
  message += "; a smaller batch or model needs less";
  throw ConfigError("memory.limit_mb", message);
}

}  // namespace mpiddp::train
