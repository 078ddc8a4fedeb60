// The trainer's answer to a terminating signal (SIGTERM, SIGINT, SIGUSR1: a batch system's
// time limit or preemption, a Ctrl-C) and the first records of a restarted attempt's log.
//
// Note [stopping on a signal]: the handler (core/interrupt.hpp) only sets a flag. Every step
// already makes one reduction across the ranks (the gradients' allreduce, or the loss's with
// sync off), and each rank adds its vote to it: 1 when it has received a signal, else 0, in
// the slot after the loss (kStopSlot), so the flag costs no message of its own. The reduced
// vote is the same on every rank, so every rank sees it after the same step, and all stop
// at the next step boundary together: then, and only then, one small allgather names the
// ranks that received a signal, rank 0 writes the checkpoint of that position (atomically,
// as every checkpoint: a second signal meanwhile only prints a line, a SIGKILL leaves the
// previous checkpoint valid), the `interrupted` record follows, and every rank ends with
// exit code 9 (kExitInterrupted). A run without checkpoint.dir stops the same way but has
// nothing to save: it ends with 128 + the signal's number, as a process killed by it would,
// so that a launcher which requeues on 9 does not start it over from the beginning.
#include <chrono>
#include <string>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/interrupt.hpp"
#include "mpiddp/distributed/rank0_io.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {

double stop_vote() { return interrupt_requested() ? 1.0 : 0.0; }

template <typename T>
void Trainer<T>::stop_for_interrupt(const checkpoint::TrainingPosition& resume_at) {
  const auto signals = comm_.allgather(static_cast<uint64_t>(interrupt_signal()));
  io::Json ranks = io::Json::array();
  std::string listed;
  int first_signal = 0;
  for (size_t r = 0; r < signals.size(); ++r) {
    if (signals[r] == 0) continue;
    if (first_signal == 0) first_signal = static_cast<int>(signals[r]);
    ranks.push_back(r);
    listed += (listed.empty() ? "" : ", ") + std::to_string(r);
  }
  const bool saving = !config_.checkpoint.dir.empty();
  const std::string path = saving ? checkpoint::checkpoint_path(config_.checkpoint.dir, resume_at.step) : "";
  checkpoint::TrainingPosition saved = resume_at;
  saved.evaluations = evaluator_->state();
  checkpointer_->save_at_interrupt(saved);  // rank 0's outcome is every rank's: exit code 9 means "saved"
  const int64_t epoch_done = resume_at.batch == 0 ? resume_at.epoch - 1 : resume_at.epoch;
  if (comm_.rank() == 0)
    log_->write({{"kind", "interrupted"}, {"epoch", epoch_done}, {"step", resume_at.step},
                 {"signal", signal_name(first_signal)}, {"ranks", ranks},
                 {"checkpoint", saving ? io::Json(path) : io::Json(nullptr)}});
  const std::string what = "interrupted by " + signal_name(first_signal) + " (received by rank" +
                           (ranks.size() > 1 ? "s " : " ") + listed + ") after step " +
                           std::to_string(resume_at.step) + " (epoch " +
                           std::to_string(epoch_done) + ")";
  if (saving)
    throw Error(kExitInterrupted,
                what + ": checkpoint '" + path + "' written; continue with --resume latest",
                Scope::kEveryRank);
  throw Error(static_cast<ExitCode>(128 + first_signal),
              what + "; nothing saved: no checkpoint.dir is configured (set checkpoint.dir to "
                     "make the run resumable)",
              Scope::kEveryRank);
}

template <typename T>
void Trainer<T>::open_log(const io::Json& run_record, const std::vector<std::string>& hosts) {
  if (!options_.restart) {
    log_->write(run_record);
    return;
  }
  // A restarted attempt's log carries on the previous attempt's at the same path, up to the
  // checkpoint it resumes from, so that one log holds the whole run: the steps and epochs
  // of both, as an uninterrupted run's log would, and a `restart` record between them.
  const std::vector<std::string> carried =
      checkpointer_->resumed_from().empty() || !log_->jsonl_enabled() ? std::vector<std::string>{}
                                                : checkpoint::log_lines_until(config_.log_path, position_);
  if (carried.empty()) log_->write(run_record);
  for (const auto& line : carried) log_->write_carried_line(line);
  const checkpoint::RestartInfo& restart = *options_.restart;
  io::Json record = {{"kind", "restart"}, {"attempt", restart.attempt}};
  if (restart.exit_code) record["exit_code"] = *restart.exit_code;
  if (!restart.reason.empty()) record["reason"] = restart.reason;
  record["from"] = checkpointer_->resumed_from().empty() ? io::Json(nullptr) : resume_point();
  if (restart.previous_world_size) record["previous_world_size"] = *restart.previous_world_size;
  record["world_size"] = comm_.size();
  record["hosts"] = hosts;
  log_->write(record);
}

#define MPIDDP_INSTANTIATE(T)                                                      \
  template void Trainer<T>::stop_for_interrupt(const checkpoint::TrainingPosition&);           \
  template void Trainer<T>::open_log(const io::Json&, const std::vector<std::string>&);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
