// Which step a config runs, and which modes combine: decided here and nowhere else
// (include/mpiddp/train/step_strategy.hpp).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/compression.hpp"
#include "mpiddp/train/data_parallel_step.hpp"
#include "mpiddp/train/deterministic_gradient_part_step.hpp"
#include "mpiddp/train/deterministic_parameter_part_step.hpp"
#include "mpiddp/train/deterministic_step.hpp"
#include "mpiddp/train/fault_injecting_step.hpp"
#include "mpiddp/train/local_step.hpp"
#include "mpiddp/train/sharded_gradients_step.hpp"
#include "mpiddp/train/sharded_parameters_step.hpp"

namespace mpiddp::train {

std::optional<ConfigError> optimizer_shard_refusal(const config::Config& c, const distributed::Communicator& comm,
                                                   bool shares_node_memory) {
  // reduce.shard "optimizer" needs every rank to hold the same averaged gradients before the
  // update (Note [the optimizer sharded across a node]) and the parts to pair up among nodes.
  // Deterministic mode's step leaves them so (its exact sum, whole on every rank), and the
  // update is elementwise and clipping's norm exact from the parts: the same bits sharded.
  // Deterministic mode's own refusals (sync off, injected faults, compression) are the
  // config's (deterministic_config.cpp): they do not depend on the world.
  const std::string shard = config::shard_key_path(c);  // as the user spelled it
  if (!c.sync)
    return ConfigError(shard, "needs sync true: with sync off each rank updates its own replica with all its state");
  if (!comm.node_parts_usable())
    return ConfigError(shard, "needs the same number of ranks on every node");
  // One rank per node: the optimizer is sharded across the leaders, whose float32
  // reduce-scatter has no bf16 form (Note [the optimizer sharded across the leaders]).
  if (distributed::shards_across_leaders(comm) &&
      distributed::parse_compression(c.reduce.compress) != distributed::Compression::kNone)
    return ConfigError("reduce.compress", "\"bf16\" is not supported with " + shard +
                                             " when each node runs one rank (the optimizer is then "
                                             "sharded across the nodes); set one of them off");
  // On the shm path the node's ranks share one copy of the parameters (Note [parameters
  // once per node]): one rank's perturbation would be its node's, written while the others
  // read, and no replica of the node could differ from another.
  if (c.faults.inject.enabled() && c.faults.inject.kind == "perturb" && shares_node_memory)
    return ConfigError("debug.fail_kind", "\"perturb\" perturbs one replica, but with " + shard +
                                             " on the shm path the ranks of a node share one copy of the "
                                             "parameters; set reduce.algorithm to \"mpi\"");
  return std::nullopt;
}

namespace {

// Why reduce.shard "gradients" (or "parameters", `mode`, which sums its gradients alike) could
// not serve this config on this layout, or nothing: the optimizer shard's refusals and ZeRO-2's own.
std::optional<ConfigError> gradient_shard_refusal(const config::Config& c, const distributed::Communicator& comm,
                                                  bool shares_node_memory, const std::string& mode) {
  if (std::optional<ConfigError> refusal = optimizer_shard_refusal(c, comm, shares_node_memory)) return refusal;
  // ZeRO-2 sums each unit into its owners' parts (Note [gradients staged by unit]): across the
  // world's parts, whose sum on a node of several ranks runs through the node's shared memory,
  // uncompressed. Deterministic mode's parts are the world's too, exchanged after an update
  // through the node's shared copy of the parameters.
  if (comm.ranks_on_node() > 1 && !shares_node_memory)
    return ConfigError("reduce.algorithm", "\"mpi\" is not supported with reduce.shard " + mode + " when a node runs "
                                           "several ranks: " +
                                               (c.deterministic.enabled
                                                    ? "the parts are exchanged through the node's shared memory; "
                                                    : "their gradients are summed in the node's shared memory; ") +
                                               "use \"auto\" or \"shm\"");
  if (distributed::parse_compression(c.reduce.compress) != distributed::Compression::kNone &&
      comm.ranks_on_node() < comm.size())
    return ConfigError("reduce.compress", "\"bf16\" is not supported with reduce.shard " + mode + ": its sums "
                                          "into the ranks' parts have no bf16 form; set one of them off");
  // Injected faults write into the whole gradient buffer, which no rank holds here.
  if (c.faults.inject.enabled())
    return ConfigError("debug.fail_kind", "injected faults are not supported with reduce.shard " + mode + " in "
                                          "this version of mpiddp; use reduce.shard \"optimizer\"");
  return std::nullopt;
}

// Why reduce.shard "parameters" could not serve this config: ZeRO-2's refusals, and what needs
// the whole parameters on a rank, which no rank holds after the start (Note [parameters
// gathered by unit]).
std::optional<ConfigError> parameter_shard_refusal(const config::Config& c, const distributed::Communicator& comm,
                                                   bool shares_node_memory) {
  const std::string mode = "\"parameters\"";
  if (std::optional<ConfigError> refusal = gradient_shard_refusal(c, comm, shares_node_memory, mode)) return refusal;
  if (!c.checkpoint.dir.empty() && c.checkpoint.format == "file")
    return ConfigError("checkpoint.format", "\"file\" gathers the whole model on rank 0 to write it, which "
                                            "reduce.shard \"parameters\" never holds; use \"parts\" (each rank writes "
                                            "its own part; mpiddp export assembles the weights)");
  if (!c.save_weights.empty())
    return ConfigError("save_weights", "writes the whole model from rank 0, which reduce.shard \"parameters\" never "
                                       "holds; write checkpoints with checkpoint.format \"parts\" and mpiddp export "
                                       "the last one");
  if (c.precision != "float32")
    return ConfigError("compute.precision", "\"" + c.precision + "\" is not supported with reduce.shard "
                                            "\"parameters\" in this version of mpiddp (its bf16 copies of the weights "
                                            "are of the whole model); use \"float32\" or reduce.shard \"gradients\"");
  return std::nullopt;
}

}  // namespace

std::optional<ConfigError> shard_refusal(const config::Config& c, const distributed::Communicator& comm,
                                         bool shares_node_memory) {
  if (c.reduce.shard_parameters) return parameter_shard_refusal(c, comm, shares_node_memory);
  if (c.reduce.shard_gradients) return gradient_shard_refusal(c, comm, shares_node_memory, "\"gradients\"");
  if (c.reduce.shard_optimizer) return optimizer_shard_refusal(c, comm, shares_node_memory);
  return std::nullopt;
}

distributed::ShardScope step_shard_scope(const config::Config& c, const distributed::Communicator& comm,
                                         bool shares_node_memory, bool compressed) {
  // Deterministic mode's step keeps each rank's own parameters (it places none in the node's
  // shared window: SynchronizedStep does), and the world's parts on nodes of several ranks
  // are exchanged through that window; with the gradient in parts it shares them as
  // SynchronizedStep does (DeterministicGradientPartStep).
  const bool parameters_in_node_memory =
      shares_node_memory && (!c.deterministic.enabled || c.reduce.shard_gradients);
  return distributed::shard_scope(comm, c.reduce.shard_optimizer, parameters_in_node_memory, compressed,
                                  c.reduce.shard_gradients);
}

void check_modes_combine(const config::Config& c, const distributed::Communicator& comm, bool shares_node_memory) {
  if (std::optional<ConfigError> refusal = shard_refusal(c, comm, shares_node_memory)) throw *refusal;
}

namespace {

template <typename T>
std::unique_ptr<StepStrategy<T>> make_mode_step(const StepParts<T>& parts) {
  if (parts.config.deterministic.enabled) {
    if (parts.config.reduce.shard_parameters) return std::make_unique<DeterministicParameterPartStep<T>>(parts);
    if (parts.config.reduce.shard_gradients) return std::make_unique<DeterministicGradientPartStep<T>>(parts);
    return std::make_unique<DeterministicStep<T>>(parts);
  }
  if (!parts.config.sync) return std::make_unique<LocalStep<T>>(parts);
  if (parts.config.reduce.shard_parameters) return std::make_unique<ShardedParametersStep<T>>(parts);
  if (parts.config.reduce.shard_gradients) return std::make_unique<ShardedGradientsStep<T>>(parts);
  return std::make_unique<DataParallelStep<T>>(parts);
}

}  // namespace

template <typename T>
std::unique_ptr<StepStrategy<T>> make_step_strategy(const StepParts<T>& parts) {
  std::unique_ptr<StepStrategy<T>> step = make_mode_step(parts);
  if (!parts.config.faults.inject.enabled()) return step;
  return std::make_unique<FaultInjectingStep<T>>(std::move(step), parts);
}

template <typename T>
double step_working_bytes(const config::Config& config, int world, Index parameters, Index buffer_values) {
  if (!config.deterministic.enabled) return 0.0;
  return deterministic_step_bytes<T>(config.deterministic.chunks, world, parameters, buffer_values);
}

template double step_working_bytes<float>(const config::Config&, int, Index, Index);
template double step_working_bytes<double>(const config::Config&, int, Index, Index);
template std::unique_ptr<StepStrategy<float>> make_step_strategy(const StepParts<float>&);
template std::unique_ptr<StepStrategy<double>> make_step_strategy(const StepParts<double>&);

}  // namespace mpiddp::train
