// The trainer's fault policies (include/mpiddp/train/step_guard.hpp): a non-finite step (skip
// it or abort, faults.on_nonfinite) and replicas found different by the replica check (abort,
// or resync: rank 0's parameters and optimizer state broadcast to every rank,
// divergence.action). See docs/reliability.md.
#include "mpiddp/train/step_guard.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

#include "mpiddp/core/error.hpp"

namespace mpiddp::train {

template <typename T>
StepGuard<T>::StepGuard(const config::FaultConfig& policy, distributed::Communicator& comm, nn::Model<T>& model,
                        optim::Optimizer<T>& optimizer, StepStrategy<T>& step, record::RunLogWriter& log,
                        bool quiet)
    : policy_(policy), comm_(comm), model_(model), optimizer_(optimizer), step_(step), log_(log), quiet_(quiet) {
  // Rank 0's parameters arrive for the replica check in pieces of at most 256 Ki values
  // (1 MiB of float): a second copy of a big model would count against every rank's memory,
  // and so does a big piece, all run long (4 MiB a rank at 1 Mi values, the check rare:
  // docs/benchmarks.md, "Where a rank's memory goes"). Smaller pieces only mean more of them.
  replica_scratch_.assign(std::min<Index>(model.parameter_count(), Index{1} << 18), T(0));
}

template <typename T>
void StepGuard<T>::nonfinite_step(int64_t step, int64_t epoch, const StepOutcome& outcome) {
  const auto saw = comm_.allgather(outcome.locally_finite ? 0 : 1);
  io::Json ranks = io::Json::array();
  std::string listed;
  for (size_t r = 0; r < saw.size(); ++r)
    if (saw[r]) {
      ranks.push_back(r);
      listed += (listed.empty() ? "" : ", ") + std::to_string(r);
    }
  ++skipped_in_a_row_;
  const bool skip = policy_.on_nonfinite == "skip" && skipped_in_a_row_ <= policy_.max_skipped;
  if (comm_.rank() == 0)
    log_.write({{"kind", "nonfinite"}, {"epoch", epoch}, {"step", step}, {"ranks", ranks},
                 {"action", skip ? "skip" : "abort"}, {"skipped_in_a_row", skipped_in_a_row_}});
  const std::string origin =
      !listed.empty() ? std::string("first seen on rank") +
                            (listed.find(',') == std::string::npos ? " " : "s ") + listed
      : outcome.gradients_inspected
          ? "although every rank's own values were finite: their sum overflowed"
          : "on a rank not identified: the reduction overlapped backward (rerun with "
            "--set reduce.overlap=false to name it)";
  const std::string what = "non-finite loss or gradient at step " + std::to_string(step) +
                           " (epoch " + std::to_string(epoch) + "), " + origin;
  if (!skip)
    throw Error(kExitNonFinite,
                what + (policy_.on_nonfinite == "abort"
                            ? " (on_nonfinite = abort)"
                            : "; " + std::to_string(skipped_in_a_row_) +
                                  " non-finite steps in a row, more than max_skipped = " +
                                  std::to_string(policy_.max_skipped)),
                Scope::kEveryRank);  // every rank saw the same reduced sum
  ++skipped_total_;
  if (comm_.rank() == 0)
    std::fprintf(stderr, "mpiddp: warning: skipped %s (on_nonfinite = skip, %lld in a row)\n",
                 what.c_str(), static_cast<long long>(skipped_in_a_row_));
}

template <typename T>
void StepGuard<T>::verify_replicas(int64_t step, bool at_end, ReplicaReport* report_out) {
  if (const std::optional<ReplicaReport> from_parts = step_.report_from_parts()) {
    if (report_out) *report_out = *from_parts;
    return;
  }
  // Before and after a resync alike, rank 0's parameters come through the scratch in pieces.
  const auto check = [&] {
    return check_replicas<T>(comm_, model_.parameters(), model_.parameter_count(),
                             replica_scratch_.data(), static_cast<Index>(replica_scratch_.size()));
  };
  const ReplicaReport report = check();
  if (report_out) *report_out = report;
  if (step_.keeps_replicas_identical() && !report.identical) {
    // The report is the same on every rank, so every rank takes the same branch here.
    std::string ranks;
    for (int r : report.differing_ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    char text[320];
    std::snprintf(text, sizeof text,
                  "replicas diverged at step %lld: the parameters of rank%s %s differ from rank "
                  "0's (max |difference| %.9g) although gradients are synchronised",
                  static_cast<long long>(step), report.differing_ranks.size() > 1 ? "s" : "",
                  ranks.c_str(), report.max_diff);
    if (policy_.divergence_action == "abort") throw Error(kExitDivergence, text, Scope::kEveryRank);
    resynchronize();
    ++resyncs_;
    if (comm_.rank() == 0) {
      log_.write({{"kind", "resync"}, {"step", step}, {"ranks", report.differing_ranks},
                   {"max_diff", report.max_diff}});
      std::fprintf(stderr, "mpiddp: warning: %s; every rank now holds rank 0's parameters and "
                           "optimizer state (divergence.action = resync)\n", text);
    }
    if (report_out) *report_out = check();
  }
  if (at_end && !step_.keeps_replicas_identical() && comm_.rank() == 0 && !quiet_) {
    std::printf("sync is off: replicas %s (max_replica_diff %.9g): each rank learned only "
                "from its own shard\n",
                report.identical ? "are still identical" : "drifted apart", report.max_diff);
  }
}

template <typename T>
void StepGuard<T>::resynchronize() {
  comm_.broadcast(model_.parameters(), static_cast<size_t>(model_.parameter_count()) * sizeof(T), 0);
  broadcast_buffers(comm_, model_);
  optimizer_.broadcast_from_rank0();
}

template class StepGuard<float>;
template class StepGuard<double>;

}  // namespace mpiddp::train
