// Activation recomputation through the whole trainer at the launcher's world size N: a tiny
// GPT whose residual blocks all recompute trains to the same parameters, bit for bit, as the
// one that keeps their activations, in the default step, with accumulate_steps 2 and in
// deterministic mode; a checkpoint written either way resumes the other way with the same
// bits. N ranks reproduce one process to 1e-5 in float32, and exactly in deterministic mode.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/quiet_training.hpp"
#include "../support/scratch_dir.hpp"
#include "../support/tiny_gpt.hpp"
#include "../support/token_files.hpp"

namespace mpiddp::train {
namespace {

constexpr int kTinyBlock = 16, kTinyWindows = 32;
constexpr size_t kTinySteps = 8;  // 32 windows at a global batch of 8: 4 steps per epoch, 2 epochs

// tests/support/tiny_gpt.hpp's model of dim 32 on the 7-letter text of a Markov chain
// (tests/support/token_files.hpp). No residual says "recompute": they keep their activations.
io::Json tiny_gpt(const std::string& dir) {
  io::Json user = test::tiny_gpt_config({.dim = 32, .positions = kTinyBlock, .batch = 8, .seed = 5, .epochs = 2,
                                         .clip_grad_norm = "1.0"},
                                        dir + "/input.txt");
  user["dtype"] = "float32";
  return user;
}

// The same config with every residual recomputing.
io::Json all_recomputing(io::Json user) {
  for (io::Json& layer : user["model"]["layers"])
    if (layer["type"] == "residual") layer["recompute"] = true;
  return user;
}

RunResult run_tiny(const io::Json& user, distributed::Communicator& comm, const std::string& resume = "") {
  return test::quiet_training(user, comm, resume);
}

void expect_recompute_bits(const RunResult& recomputed, const RunResult& kept, const std::string& what) {
  ASSERT_EQ(kept.step_losses.size(), kTinySteps) << what;
  EXPECT_EQ(recomputed.step_losses, kept.step_losses) << what;
  EXPECT_EQ(recomputed.replicas.checksum, kept.replicas.checksum) << what << ": the parameters differ";
  EXPECT_TRUE(recomputed.replicas.identical) << what;
}

std::string tiny_text_files(distributed::Communicator& comm) {
  return test::shared_token_files(comm, "recompute_gpt", kTinyWindows, kTinyBlock);
}

TEST(RecomputeMpi, TheSameParametersAsKeepingTheActivations) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const io::Json kept = tiny_gpt(tiny_text_files(comm));
  const RunResult kept_run = run_tiny(kept, comm);
  const RunResult recomputed_run = run_tiny(all_recomputing(kept), comm);
  expect_recompute_bits(recomputed_run, kept_run, "N=" + std::to_string(comm.size()));
  // The model is the one meant: small logits give about ln 7 at the first step.
  EXPECT_NEAR(kept_run.step_losses.front(), std::log(7.0), 0.05);

  // Micro-batches: each one's backward recomputes with its own samples' positions.
  io::Json accumulated = kept;
  accumulated["accumulate_steps"] = 2;
  expect_recompute_bits(run_tiny(all_recomputing(accumulated), comm), run_tiny(accumulated, comm),
                        "accumulate_steps 2");

  // N ranks against one process: the gradient sums in another order, so float32's rounding.
  const RunResult single = run_tiny(all_recomputing(kept), one);
  ASSERT_EQ(single.step_losses.size(), kTinySteps);
  for (size_t s = 0; s < kTinySteps; ++s)
    EXPECT_NEAR(recomputed_run.step_losses[s], single.step_losses[s], 1e-5 * single.step_losses[s])
        << "step " << s + 1 << " at N=" << comm.size();
}

TEST(RecomputeMpi, DeterministicModeGivesOneProcessesBitsAtEveryWorldSize) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  io::Json kept = tiny_gpt(tiny_text_files(comm));
  // A sample per chunk; the residuals take no chunked pass, so the step goes chunk by chunk.
  kept["deterministic"] = {{"chunks", 8}};
  expect_recompute_bits(run_tiny(all_recomputing(kept), comm), run_tiny(kept, one),
                   "deterministic, N=" + std::to_string(comm.size()) + " against one process");
}

TEST(RecomputeMpi, ACheckpointResumesWithRecomputeSwitchedEitherWay) {
  distributed::MpiCommunicator comm;
  const std::string dir = test::shared_scratch_dir(comm, "recompute_resume");
  const io::Json kept = tiny_gpt(tiny_text_files(comm));
  io::Json kept_writing = kept, recomputed_writing = all_recomputing(kept);
  kept_writing["checkpoint"] = {{"dir", dir + "/kept"}, {"every_steps", 1}, {"keep", 0}};
  recomputed_writing["checkpoint"] = {{"dir", dir + "/recomputed"}, {"every_steps", 1}, {"keep", 0}};
  const RunResult straight = run_tiny(kept_writing, comm);
  expect_recompute_bits(run_tiny(recomputed_writing, comm), straight, "written with recompute");
  // Step 3 is in the middle of the first epoch.
  const std::vector<double> after_step3(straight.step_losses.begin() + 3, straight.step_losses.end());
  for (const std::string from : {"kept", "recomputed"}) {
    const io::Json resuming = from == "kept" ? all_recomputing(kept) : kept;
    const RunResult resumed = run_tiny(resuming, comm, checkpoint::checkpoint_path(dir + "/" + from, 3));
    EXPECT_EQ(resumed.step_losses, after_step3) << "resumed from the " << from << " run's checkpoint";
    EXPECT_EQ(resumed.replicas.checksum, straight.replicas.checksum) << "resumed from the " << from << " run's";
  }
}

}  // namespace
}  // namespace mpiddp::train
