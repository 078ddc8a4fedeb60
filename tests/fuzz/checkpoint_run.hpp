#pragma once
// What the checkpoint fuzz targets (checkpoint_fuzz.cpp, checkpoint_parts_fuzz.cpp) resume
// into: a 2-linear2-tanh-linear1 model (9 parameters, initialised from seed 1) with Adam (two
// state buffers), float32, 4 steps of 2 samples per epoch, and a scratch directory of its own;
// and how a reader's refusal is told from a finding.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/update_rule.hpp"

namespace mpiddp::fuzz {

struct CheckpointRun {
  nn::Model<float> model{{2}, nn::parse_layer_list(io::Json::parse(
      R"([{"type": "linear", "out": 2}, {"type": "tanh"}, {"type": "linear", "out": 1}])")), 2};
  std::unique_ptr<optim::UpdateRule<float>> optimizer =
      optim::make_update_rule<float>(optim::OptimizerConfig{"adam"}, model.parameter_count());
  checkpoint::RunIdentity identity;
  std::string dir;  // under /dev/shm (memory) when it is writable

  explicit CheckpointRun(const std::string& name)
      : dir(std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") + "/mpiddp-fuzz-" + name + "-" +
            std::to_string(getpid())) {
    identity.model = model.describe();
    identity.dtype = "float32";
    identity.config = {{"seed", 1}};
    identity.global_batch = 2;
    identity.train_samples = 8;
    identity.steps_per_epoch = 4;
    model.initialize(1);
  }
  ~CheckpointRun() { std::filesystem::remove_all(dir); }
};

// Runs `read`: an Error with the checkpoint's exit code is a refusal, what the reader must do
// with a bad input; anything else passes on, a finding.
template <typename Read>
void refused_or_read(Read read) {
  try {
    read();
  } catch (const Error& e) {
    if (e.code() != kExitCheckpoint) throw;
  }
}

}  // namespace mpiddp::fuzz
