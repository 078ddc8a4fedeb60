#pragma once
// The experiment of the checkpoint/resume tests: the default experiment with Adam, so the
// optimizer has state (two moment buffers and a step count) that a resume must restore,
// checkpointing into `checkpoint_dir` and keeping every checkpoint. 4 steps per epoch.
#include <string>

#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "quiet_training.hpp"

namespace mpiddp::test {

inline io::Json adam_experiment(const std::string& checkpoint_dir) {
  io::Json user = config::default_experiment();
  config::apply_override(user, "optimizer={\"type\":\"adam\",\"lr\":0.01}");
  config::apply_override(user, "checkpoint.dir=\"" + checkpoint_dir + "\"");
  config::apply_override(user, "checkpoint.keep=0");
  return user;
}

// Trains quietly, resuming from `resume` when it is not empty.
inline train::RunResult train_run(distributed::Communicator& comm, const io::Json& user,
                                  const std::string& resume = "") {
  return quiet_training(user, comm, resume);
}

}  // namespace mpiddp::test
