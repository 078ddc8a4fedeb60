#pragma once
// A whole training run from a user config, in-process and without output: what the
// equivalence tests compare across world sizes. resume: --resume's argument ("" to start afresh).
#include <string>

#include "mpiddp/config/config.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::test {

inline train::RunResult quiet_training(const io::Json& user, distributed::Communicator& comm,
                                       const std::string& resume = "") {
  train::TrainOptions options;
  options.quiet = true;
  options.resume = resume;
  return train::run_training(config::parse_config(user), comm, options);
}

}  // namespace mpiddp::test
