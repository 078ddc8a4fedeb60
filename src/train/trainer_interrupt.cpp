// The trainer's answer to a terminating signal (SIGTERM, SIGINT, SIGUSR1: a batch system's
// time limit or preemption, a Ctrl-C).
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
#include <optional>
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
  const std::string path = saving ? checkpointer_->series_path(resume_at.step) : "";
  checkpoint::TrainingPosition saved = resume_at;
  saved.evaluations = evaluator_->state();
  checkpointer_->save_at_interrupt(saved);  // rank 0's outcome is every rank's: exit code 9 means "saved"
  const int64_t epoch_done = resume_at.batch == 0 ? resume_at.epoch - 1 : resume_at.epoch;
  record_->interrupted(epoch_done, resume_at.step, signal_name(first_signal), ranks,
                       saving ? std::optional<std::string>(path) : std::nullopt);
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

#define MPIDDP_INSTANTIATE(T)                                                      \
  template void Trainer<T>::stop_for_interrupt(const checkpoint::TrainingPosition&);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
