// Trainer::start(): the collective start-up (watchdog, shared gradient buffer, sampler.order,
// initial state, the config handshake) that ends in the run record and the table's header;
// and the resume point the run record names.
#include "mpiddp/train/trainer.hpp"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/rng.hpp"
#include "mpiddp/distributed/reduction_levels.hpp"
#include "mpiddp/kernels/isa.hpp"
#include "mpiddp/kernels/precision.hpp"
#include "mpiddp/record/step_profile.hpp"

namespace mpiddp::train {

template <typename T>
void Trainer<T>::start() {
  // The command line arms it before setup already; library callers get it here.
  comm_.start_watchdog(config_.faults.watchdog_timeout_s,
                       config_.faults.watchdog_action == "abort");
  // Creating the shared memory for the gradients is a collective, so here.
  place_for_reduction(replica_.reducer, *replica_.model);
  // Rank 0 reads sampler.order and broadcasts it: a collective, so here rather than in the
  // constructor, whose setup stays local (see TrainingRun).
  if (!config_.sampler_order.empty())
    data_.order = data::load_sample_order(comm_, config_.sampler_order, data_.set.samples, config_.epochs);
  position_ = checkpointer_->initial_state(options_.resume);
  evaluator_->restore(position_.evaluations);
  // Rank 0's initial parameters are everyone's: replicas start identical even if a rank's
  // initialisation differed (another build, another libm), and init.weights is read there.
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
  // Every rank's host, in rank order (a collective: every rank takes part).
  const std::vector<std::string> hosts = comm_.allgather_string(comm_.host_name());
  // What the reduction does inside a node and between nodes (distributed/reduction_levels.hpp).
  const auto levels =
      distributed::reduction_levels(replica_.reducer.algorithm(), hosts, comm_.ranks_on_node());
  if (comm_.rank() == 0) {
    io::Json run_record = {{"kind", "run"},
                       {"world_size", comm_.size()},
                       {"launcher", options_.launcher},
                       {"hosts", hosts},
                       {"config", config_.resolved},
                       {"version", MPIDDP_VERSION},
                       {"mpi_library", comm_.library_version()},
                       {"parameters", replica_.model->parameter_count()},
                       {"threads", threads_},
                       {"gemm", gemm_record(gemm_)},
                       {"reduce_algorithm", distributed::to_string(replica_.reducer.algorithm())},
                       {"reduce_compress", distributed::to_string(replica_.reducer.compression())},
                       {"reduce_shard_optimizer", replica_.optimizer->scope() != distributed::ShardScope::kNone},
                       {"reduction", {{"nodes", levels.nodes},
                                      {"ranks_per_node", levels.ranks_per_node},
                                      {"within_node", levels.within_node},
                                      {"between_nodes", levels.between_nodes}}},
                       {"model", replica_.model->describe()}};
    // With `threads` auto each product takes one thread or all by its size (Note [threads per
    // product] in kernels/gemm.cpp): the limit, appended when there is one.
    if (threads_ > 1 && kernels::one_thread_limit() > 0) run_record["threads_one_below"] = kernels::one_thread_limit();
    // Among whom the optimizer's parts are cut: appended, so the record keeps its earlier prefix.
    run_record["reduce_shard_across"] = distributed::shard_scope_name(replica_.optimizer->scope());
    // The instruction-set levels: what this CPU runs and the level our kernels run at
    // (compute.isa; kernels/isa.hpp). Appended, so the record keeps its earlier prefix.
    io::Json cpu_levels = io::Json::array();
    for (kernels::Isa level : kernels::cpu_isas()) cpu_levels.push_back(kernels::isa_name(level));
    run_record["isa"] = {{"cpu", cpu_levels}, {"used", kernels::isa_name(kernels::active_isa())}};
    // The products' precision (compute.precision), which `mpiddp compare` reads for its default
    // tolerance. Appended, as isa.
    run_record["precision"] = kernels::precision_name(kernels::precision_in_use());
    // reduce.compress set where nothing crosses between nodes: said, not silently ignored.
    if (!replica_.reducer.compression_note().empty()) {
      run_record["reduce_compress_note"] = replica_.reducer.compression_note();
      std::fprintf(stderr, "note: reduce.compress \"%s\" changes nothing here: %s\n",
                   config_.reduce.compress.c_str(), replica_.reducer.compression_note().c_str());
    }
    // Deterministic mode's record tells `mpiddp compare` to demand bitwise equality
    // (docs/log-format.md).
    step_->describe(run_record);
    if (!checkpointer_->resumed_from().empty()) run_record["resumed_from"] = resume_point();
    open_log(run_record, hosts);
    if (!options_.quiet) {
      std::printf("mpiddp %s: %d rank%s, model %s (%lld parameters), global batch %lld, %s\n",
                  MPIDDP_VERSION, comm_.size(), comm_.size() == 1 ? "" : "s",
                  replica_.model->describe().c_str(), static_cast<long long>(replica_.model->parameter_count()),
                  static_cast<long long>(data_.batch_per_rank * comm_.size()), config_.dtype.c_str());
      std::printf("%6s  %14s  %9s  %8s  %10s\n", "epoch", "eval_loss", "eval_acc", "time_s",
                  "samples/s");
      std::fflush(stdout);
    }
  }
}

template <typename T>
io::Json Trainer<T>::resume_point() const {
  return {{"path", checkpointer_->resumed_from()}, {"epoch", position_.epoch}, {"batch", position_.batch},
          {"step", position_.step}};
}

#define MPIDDP_INSTANTIATE(T)         \
  template void Trainer<T>::start(); \
  template io::Json Trainer<T>::resume_point() const;
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
