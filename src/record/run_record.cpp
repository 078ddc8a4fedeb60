// The run's record: rank 0's log and the records that are the run's own (run_record.hpp).
// The records' keys and their order are the public log format (docs/log-format.md): keys added
// later are appended, so that every record keeps its earlier prefix.
#include "mpiddp/record/run_record.hpp"

#include <cstdio>
#include <utility>

#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/kernels/isa.hpp"
#include "mpiddp/kernels/precision.hpp"

namespace mpiddp::record {

io::Json resume_point(const std::string& path, const checkpoint::TrainingPosition& position) {
  return {{"path", path}, {"epoch", position.epoch}, {"batch", position.batch}, {"step", position.step}};
}

RunRecord::RunRecord(const config::Config& config, const distributed::Communicator& comm, bool quiet,
                     std::optional<checkpoint::RestartInfo> restart)
    : config_(config),
      comm_(comm),
      quiet_(quiet),
      restart_(std::move(restart)),
      log_(comm.rank() == 0
               ? RunLogWriter(RunLogPaths{config.log_path, config.log_csv, config.log_tensorboard})
               : RunLogWriter()) {}

io::Json RunRecord::run_record(const RunFacts& facts) const {
  io::Json record = {{"kind", "run"},
                     {"world_size", comm_.size()},
                     {"launcher", facts.launcher},
                     {"hosts", facts.hosts},
                     {"config", config_.resolved},
                     {"version", MPIDDP_VERSION},
                     {"mpi_library", comm_.library_version()},
                     {"parameters", facts.parameters},
                     {"threads", facts.threads},
                     {"gemm", facts.gemm},
                     {"reduce_algorithm", facts.reduce_algorithm},
                     {"reduce_compress", facts.reduce_compress},
                     {"reduce_shard_optimizer", facts.shard_scope != distributed::ShardScope::kNone},
                     {"reduction", {{"nodes", facts.levels.nodes},
                                    {"ranks_per_node", facts.levels.ranks_per_node},
                                    {"within_node", facts.levels.within_node},
                                    {"between_nodes", facts.levels.between_nodes}}},
                     {"model", facts.model}};
  // With `threads` auto each product takes one thread or all by its size (Note [threads per
  // product] in kernels/gemm.cpp): the limit, when there is one.
  if (facts.threads > 1 && kernels::one_thread_limit() > 0) record["threads_one_below"] = kernels::one_thread_limit();
  // Among whom the optimizer's parts are cut.
  record["reduce_shard_across"] = distributed::shard_scope_name(facts.shard_scope);
  // What the ranks cut among themselves (reduce.shard).
  record["reduce_shard"] = config_.reduce.shard_parameters                    ? "parameters"
                          : config_.reduce.shard_gradients                     ? "gradients"
                          : facts.shard_scope != distributed::ShardScope::kNone ? "optimizer"
                                                                                : "none";
  // What a rank holds, by kind, as checked against memory.limit_mb before the model was built.
  if (!facts.memory.is_null()) record["memory"] = facts.memory;
  // The instruction-set levels: what this CPU runs and the level our kernels run at
  // (compute.isa; kernels/isa.hpp).
  io::Json cpu_levels = io::Json::array();
  for (kernels::Isa level : kernels::cpu_isas()) cpu_levels.push_back(kernels::isa_name(level));
  record["isa"] = {{"cpu", cpu_levels}, {"used", kernels::isa_name(kernels::active_isa())}};
  // The products' precision (compute.precision), which `mpiddp compare` reads for its default
  // tolerance.
  record["precision"] = kernels::precision_name(kernels::precision_in_use());
  // reduce.compress set where nothing crosses between nodes: said, not silently ignored.
  if (!facts.reduce_compress_note.empty()) record["reduce_compress_note"] = facts.reduce_compress_note;
  // Deterministic mode's keys tell `mpiddp compare` to demand bitwise equality.
  for (const auto& [key, value] : facts.step_description.items()) record[key] = value;
  if (facts.resumed_from) record["resumed_from"] = *facts.resumed_from;
  return record;
}

void RunRecord::open(const RunFacts& facts, const checkpoint::TrainingPosition& position) {
  if (comm_.rank() != 0) return;
  if (!facts.reduce_compress_note.empty())
    std::fprintf(stderr, "note: reduce.compress \"%s\" changes nothing here: %s\n", config_.reduce.compress.c_str(),
                 facts.reduce_compress_note.c_str());
  if (!restart_) {
    log_.write(run_record(facts));
  } else {
    // A restarted attempt's log carries on the previous attempt's at the same path, up to the
    // checkpoint it resumes from, so that one log holds the whole run: the steps and epochs of
    // both, as an uninterrupted run's log would, and a `restart` record between them.
    const std::vector<std::string> carried = !facts.resumed_from || !log_.jsonl_enabled()
                                                 ? std::vector<std::string>{}
                                                 : checkpoint::log_lines_until(config_.log_path, position);
    if (carried.empty()) log_.write(run_record(facts));
    for (const auto& line : carried) log_.write_carried_line(line);
    io::Json record = {{"kind", "restart"}, {"attempt", restart_->attempt}};
    if (restart_->exit_code) record["exit_code"] = *restart_->exit_code;
    if (!restart_->reason.empty()) record["reason"] = restart_->reason;
    record["from"] = facts.resumed_from ? *facts.resumed_from : io::Json(nullptr);
    if (restart_->previous_world_size) record["previous_world_size"] = *restart_->previous_world_size;
    record["world_size"] = comm_.size();
    record["hosts"] = facts.hosts;
    log_.write(record);
  }
  if (quiet_) return;
  std::printf("mpiddp %s: %d rank%s, model %s (%lld parameters), global batch %lld, %s\n", MPIDDP_VERSION,
              comm_.size(), comm_.size() == 1 ? "" : "s", facts.model.c_str(), static_cast<long long>(facts.parameters),
              static_cast<long long>(facts.global_batch), config_.dtype.c_str());
  std::printf("%6s  %14s  %9s  %8s  %10s\n", "epoch", "eval_loss", "eval_acc", "time_s", "samples/s");
  std::fflush(stdout);
}

void RunRecord::step(int64_t epoch, int64_t step, double loss, double lr, double seconds, double grad_norm) {
  if (comm_.rank() != 0 || step % config_.log_every_steps != 0) return;
  io::Json record = {{"kind", "step"}, {"epoch", epoch}, {"step", step}, {"loss", loss}, {"lr", lr},
                     {"time_s", seconds}};
  if (config_.optimizer.clip_grad_norm > 0.0) record["grad_norm"] = grad_norm;  // before clipping
  log_.write(record);
}

void RunRecord::interrupted(int64_t epoch, int64_t step, const std::string& signal, const io::Json& ranks,
                            const std::optional<std::string>& written) {
  if (comm_.rank() != 0) return;
  log_.write({{"kind", "interrupted"}, {"epoch", epoch}, {"step", step}, {"signal", signal}, {"ranks", ranks},
              {"checkpoint", written ? io::Json(*written) : io::Json(nullptr)}});
}

void RunRecord::end(const RunEnd& end) {
  if (comm_.rank() != 0) return;
  log_.write({{"kind", "end"},
              {"steps", end.steps},
              {"param_checksum", end.param_checksum},
              {"replicas_identical", end.replicas_identical},
              {"max_replica_diff", end.max_replica_diff},
              {"skipped_steps", end.skipped_steps},
              {"resyncs", end.resyncs},
              {"time_s", end.time_s}});
}

}  // namespace mpiddp::record
