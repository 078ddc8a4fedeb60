// The trainer's local setup: the constructor loads the data, builds the model, loss and
// optimizer, allocates the step buffers and rejects a config whose data does not fit the
// model; no collective (see TrainingRun). Also the reduction's plan and the placement of
// the gradient buffer, which `mpiddp bench --reduce-only` shares.
#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/data/source.hpp"
#include "mpiddp/train/fault_injection.hpp"
#include "mpiddp/train/trace_file.hpp"

namespace mpiddp::train {

namespace {

template <typename T>
void check_data_fits(const Config& c, const data::Dataset<T>& set, const std::string& key,
                     Index inputs, Index outputs) {
  if (set.features != inputs)
    throw ConfigError(key, "has " + std::to_string(set.features) + " features but model.inputs is " +
                               std::to_string(inputs));
  if (c.loss == "cross_entropy") {
    if (!set.is_classification())
      throw ConfigError("loss", "cross_entropy needs class labels, but " + key + " (" + set.name +
                                    ") is a regression dataset; use \"mse\"");
    if (set.classes != outputs)
      throw ConfigError("model.layers", "the last layer has " + std::to_string(outputs) +
                                            " outputs but " + key + " has " +
                                            std::to_string(set.classes) + " classes");
  } else {
    if (set.is_classification())
      throw ConfigError("loss", "mse needs regression targets, but " + key + " (" + set.name +
                                    ") has class labels; use \"cross_entropy\"");
    if (set.outputs != outputs)
      throw ConfigError("model.layers", "the last layer has " + std::to_string(outputs) +
                                            " outputs but " + key + " has " +
                                            std::to_string(set.outputs) + " targets per sample");
  }
}

// The fewest samples one training forward pass sees: the smaller of a full step's and the
// epoch's last (shorter) step's smallest micro-batch (see compute_gradients' split).
Index smallest_micro_batch(Index per_rank, Index batch_per_rank, Index accumulate_steps) {
  const Index steps = (per_rank + batch_per_rank - 1) / batch_per_rank;
  const Index last = per_rank - (steps - 1) * batch_per_rank;
  auto smallest = [&](Index count) { return count / std::min(accumulate_steps, count); };
  return std::min(smallest(batch_per_rank), smallest(last));
}

// reduce.shard_optimizer needs every rank to hold the same averaged gradients before the
// update (Note [the optimizer sharded across a node]) and the parts to pair up among nodes.
void check_optimizer_shard_fits(const Config& c, const distributed::Communicator& comm,
                                bool shares_node_memory) {
  if (!c.reduce.shard_optimizer) return;
  if (!c.sync)
    throw ConfigError("reduce.shard_optimizer", "needs sync true: with sync off each rank "
                                                "updates its own replica with all its state");
  if (c.deterministic.enabled)
    throw ConfigError("reduce.shard_optimizer", "is not supported with deterministic.enabled; "
                                                "set one of them to false");
  if (!comm.node_parts_usable())
    throw ConfigError("reduce.shard_optimizer", "needs the same number of ranks on every node");
  // One rank per node: the optimizer is sharded across the leaders, whose float32
  // reduce-scatter has no bf16 form (Note [the optimizer sharded across the leaders]).
  if (shards_across_leaders(comm) &&
      distributed::parse_compression(c.reduce.compress) != distributed::Compression::kNone)
    throw ConfigError("reduce.compress", "\"bf16\" is not supported with reduce.shard_optimizer "
                                         "when each node runs one rank (the optimizer is then "
                                         "sharded across the nodes); set one of them off");
  // On the shm path the node's ranks share one copy of the parameters (Note [parameters
  // once per node]): one rank's perturbation would be its node's, written while the others
  // read, and no replica of the node could differ from another.
  if (c.faults.inject.enabled() && c.faults.inject.kind == "perturb" && shares_node_memory)
    throw ConfigError("debug.fail_kind", "\"perturb\" perturbs one replica, but with "
                                         "reduce.shard_optimizer on the shm path the ranks of a "
                                         "node share one copy of the parameters; set "
                                         "reduce.algorithm to \"mpi\"");
}

}  // namespace

template <typename T>
Trainer<T>::Trainer(const Config& config, distributed::Communicator& comm, TrainOptions options)
    : config_(config), comm_(comm), options_(options),
      train_(data::load_source<T>(config.train_data, config.seed, "train")),
      reducer_(comm, config.reduce),
      trace_(config.trace),
      statistics_(comm),
      sampler_(train_.samples, comm.rank(), comm.size(), config.shuffle, config.drop_last,
               config.seed),
      batch_per_rank_(config.per_rank_batch(comm.size())) {
  check_deterministic_fits(config, comm.size(), train_.samples);
  if (batch_per_rank_ % config.accumulate_steps != 0)
    throw ConfigError("accumulate_steps", "accumulate_steps " +
                                              std::to_string(config.accumulate_steps) +
                                              " does not divide the per-rank batch " +
                                              std::to_string(batch_per_rank_));
  if (config.eval_data) eval_ = data::load_source<T>(*config.eval_data, config.seed, "eval");
  const nn::Shape input_shape = model_input_shape(config, train_.shape, train_.features, "data.train");
  const Index inputs = nn::shape_size(input_shape);
  // Extra gradient slots carry the loss and the stop vote (kReservedSlots, trainer.hpp).
  model_ = std::make_unique<nn::Sequential<T>>(input_shape, config.layers, batch_per_rank_,
                                               kReservedSlots);
  plan_reduction(reducer_, *model_);
  threads_ = choose_threads(config.threads, std::getenv("OMP_NUM_THREADS"), affinity_cores(),
                            node_cores(), comm.ranks_on_node(),
                            nn::typical_product_multiply_adds(model_->gemm_calls(batch_per_rank_)))
                 .threads;
  use_threads(threads_);
  ready_forwarder_.reducer = &reducer_;
  check_data_fits(config, train_, "data.train", inputs, model_->outputs());
  if (eval_) check_data_fits(config, *eval_, "data.eval", inputs, model_->outputs());
  if (sampler_.per_rank() == 0)
    throw ConfigError("data.train.samples", "fewer samples than ranks with drop_last: every "
                                            "rank would get an empty epoch");
  // BatchNorm normalises over the global micro-batch when its statistics are shared
  // (batchnorm.sync, and gradients synchronised at all), else over the rank's own.
  const bool shared_statistics = config.sync && config.batchnorm_sync && comm.size() > 1;
  training_pass_.seed = config.seed;
  training_pass_.statistics = shared_statistics ? &statistics_ : nullptr;
  broadcast_buffers_each_step_ = config.sync && !config.batchnorm_sync && comm.size() > 1 &&
                                 model_->buffer_value_count() + model_->buffer_counter_count() > 0;
  const Index smallest = smallest_micro_batch(sampler_.per_rank(), batch_per_rank_,
                                              config.accumulate_steps);
  model_->layers().check_training_batch(shared_statistics ? smallest * comm.size() : smallest);
  if (config.deterministic.enabled) setup_deterministic();
  positions_.resize(static_cast<size_t>(batch_per_rank_));
  for (Index j = 0; j < batch_per_rank_; ++j) positions_[j] = j * comm.size() + comm.rank();
  loss_ = nn::make_loss<T>(config.loss);
  check_optimizer_shard_fits(config, comm, reducer_.shares_node_memory());
  const ShardScope scope =
      shard_scope(comm, config.reduce.shard_optimizer, reducer_.shares_node_memory(),
                  reducer_.compression() != distributed::Compression::kNone);
  optimizer_ = std::make_unique<OptimizerShard<T>>(config.optimizer, model_->parameter_count(), comm, scope);
  if (optimizer_->across_world()) {
    // Each rank's part of the sum, the last one with the loss and stop slots after the parameters.
    std::vector<size_t> parts = optimizer_->part_begins();
    parts.back() = static_cast<size_t>(model_->gradient_count());
    reducer_.scatter_into_parts(std::move(parts));
  }
  // Only rank 0 writes the log; the other ranks hold a disabled one.
  log_ = comm.rank() == 0 && !config.log_path.empty()
             ? std::make_unique<io::JsonlLog>(config.log_path)
             : std::make_unique<io::JsonlLog>();
  // An unwritable trace.path is known now, not after the run (rank 0 writes the file).
  if (trace_.enabled() && comm.rank() == 0) check_trace_writable(config.trace.path);
  batch_x_.assign(inputs * batch_per_rank_, T(0));
  batch_y_.assign(std::max<Index>(train_.outputs, eval_ ? eval_->outputs : 0) * batch_per_rank_, T(0));
  batch_labels_.assign(batch_per_rank_, 0);
  // Rank 0's parameters arrive for the replica check in pieces of at most 256 Ki values
  // (1 MiB of float): a second copy of a big model would count against every rank's memory,
  // and so does a big piece, all run long (4 MiB a rank at 1 Mi values, the check rare:
  // docs/benchmarks.md, "Where a rank's memory goes"). Smaller pieces only mean more of them.
  replica_scratch_.assign(std::min<Index>(model_->parameter_count(), Index{1} << 18), T(0));
  inject_setup_fault(config.faults.inject, comm.rank());
}

template <typename T>
void Trainer<T>::select_gemm() {
  // An explicit compute.gemm is every rank's already; `auto` is measured once, on rank 0
  // (Note [the choice is remembered]), and sent: replicas must not mix libraries.
  if (config_.deterministic.enabled) {
    start_deterministic();  // the library with the pass (Note [deterministic mode's library])
  } else if (config_.gemm != "auto") {
    gemm_ = choose_gemm<T>(config_.gemm, {}, threads_);
  } else {
    if (comm_.rank() == 0) gemm_ = choose_gemm<T>(config_.gemm, model_->gemm_calls(batch_per_rank_), threads_);
    int32_t backend = static_cast<int32_t>(gemm_.backend);
    comm_.broadcast(&backend, sizeof backend, 0);
    gemm_.backend = static_cast<nn::GemmBackend>(backend);
  }
  nn::use_gemm_backend(gemm_.backend, threads_);
}

template <typename T>
void plan_reduction(distributed::GradientReducer<T>& reducer, const nn::Sequential<T>& model) {
  reducer.set_tensor_begins(model.tensor_bounds());  // P: where the reserved slots begin
  reducer.keep_exact_from(static_cast<size_t>(model.parameter_count()));
}

template <typename T>
void place_for_reduction(distributed::GradientReducer<T>& reducer, nn::Sequential<T>& model) {
  if (T* shared = reducer.allocate_shared_buffer(static_cast<size_t>(model.gradient_count())))
    model.place_gradients(shared);
}

template Trainer<float>::Trainer(const Config&, distributed::Communicator&, TrainOptions);
template Trainer<double>::Trainer(const Config&, distributed::Communicator&, TrainOptions);
template void Trainer<float>::select_gemm();
template void Trainer<double>::select_gemm();
template void plan_reduction(distributed::GradientReducer<float>&, const nn::Sequential<float>&);
template void plan_reduction(distributed::GradientReducer<double>&, const nn::Sequential<double>&);
template void place_for_reduction(distributed::GradientReducer<float>&, nn::Sequential<float>&);
template void place_for_reduction(distributed::GradientReducer<double>&, nn::Sequential<double>&);

}  // namespace mpiddp::train
