// Trainer::start(): the collective start-up (watchdog, shared gradient buffer, sampler.order,
// initial state, the config handshake) that ends in what the run record says of the run
// (run_record.hpp), which opens the log.
#include "mpiddp/train/trainer.hpp"

#include <chrono>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/rng.hpp"
#include "mpiddp/distributed/reduction_levels.hpp"

namespace mpiddp::train {

template <typename T>
void Trainer<T>::start() {
  // The command line arms it before setup already; library callers get it here.
  comm_.start_watchdog(config_.faults.watchdog_timeout_s,
                       config_.faults.watchdog_action == "abort");
  // Creating the shared memory for the gradients is a collective, so here.
  step_->place_gradient_buffer(replica_.reducer, *replica_.model);
  // Rank 0 reads sampler.order and broadcasts it: a collective, so here rather than in the
  // constructor, whose setup stays local (see TrainingRun).
  if (!config_.sampler_order.empty())
    data_.order = data::load_sample_order(comm_, config_.sampler_order, data_.set.samples, config_.epochs);
  position_ = checkpointer_->initial_state(options_.resume);
  evaluator_->restore(position_.evaluations);
  // Rank 0's initial parameters are everyone's: replicas start identical even if a rank's
  // initialisation differed (another build, another libm), and init.weights is read there.
  // A model holding its part of the parameters alone (reduce.shard "parameters") has no
  // replicas: each value has one owner, which made or read it itself.
  if (replica_.model->holds_all_parameters())
    comm_.broadcast(replica_.model->parameters(),
                    static_cast<size_t>(replica_.model->parameter_count()) * sizeof(T), 0);
  broadcast_buffers(comm_, *replica_.model);
  const uint64_t mine = mix_seed(config_hash(config_), fnv1a(replica_.model->describe()));
  const auto all = comm_.allgather(mine);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error(kExitConfig,
                  "rank " + std::to_string(r) + "'s config or model differs from rank 0's (hash " +
                      hex64(all[r]) + " vs " + hex64(all[0]) +
                      "): every rank must run the same config and build",
                  Scope::kEveryRank);
  // The library for the matrix products, the same on every rank, and the rest of the
  // step's collective start-up.
  gemm_ = step_->start(threads_);
  kernels::use_gemm_backend(gemm_.backend, threads_);
  record::RunFacts facts;
  facts.launcher = options_.launcher;
  facts.hosts = comm_.allgather_string(comm_.host_name());  // a collective: every rank takes part
  facts.model = replica_.model->describe();
  facts.parameters = replica_.model->parameter_count();
  facts.global_batch = data_.batch_per_rank * comm_.size();
  facts.threads = threads_;
  facts.gemm = gemm_record(gemm_);
  facts.reduce_algorithm = distributed::to_string(replica_.reducer.algorithm());
  facts.reduce_compress = distributed::to_string(replica_.reducer.compression());
  facts.reduce_compress_note = replica_.reducer.compression_note();
  facts.shard_scope = replica_.optimizer->scope();
  // What the reduction does inside a node and between nodes (distributed/reduction_levels.hpp).
  facts.levels = distributed::reduction_levels(replica_.reducer.algorithm(), facts.hosts, comm_.ranks_on_node());
  step_->describe(facts.step_description);
  facts.memory = memory_record(memory_need_, config_.memory_limit_mb);
  if (!checkpointer_->resumed_from().empty()) facts.resumed_from = record::resume_point(checkpointer_->resumed_from(), position_);
  record_->open(facts, position_);
}

#define MPIDDP_INSTANTIATE(T)         \
  template void Trainer<T>::start();
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
