// A GPT through the whole trainer at the launcher's world size N: two pre-LayerNorm blocks
// with attention dropout and dropout, a head tied to the token embedding, AdamW with
// nanoGPT's decay rule and gradient clipping, on the text source's windows of a Markov chain.
// At N ranks it reproduces the one-process run: float64 to 1e-12 and float32 to 1e-5 per
// step, on both reduction paths and with accumulate_steps 2, the replicas bit-identical; in
// deterministic mode bit for bit, also when a one-process checkpoint written mid-epoch
// resumes at N ranks, and with attention's tiled algorithm.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/quiet_training.hpp"
#include "../support/scratch_dir.hpp"
#include "../support/tiny_gpt.hpp"
#include "../support/token_files.hpp"

namespace mpiddp::train {
namespace {

constexpr int kPositions = 8, kSamples = 48;

// 48 windows, a global batch of 24: 2 steps per epoch, 3 epochs. Every N of 1, 2, 3, 4, 6, 8
// divides the batch, and 24 chunks of one sample each divide it too.
io::Json gpt(const std::string& dir, const std::string& dtype) {
  io::Json user = test::tiny_gpt_config({.dim = 16, .positions = kPositions, .batch = 24, .seed = 11, .epochs = 3,
                                         .clip_grad_norm = "0.1"},
                                        dir + "/input.txt");
  user["dtype"] = dtype;
  user["data"]["eval"] = user["data"]["train"];
  return user;
}

RunResult train(const io::Json& user, distributed::Communicator& comm, const std::string& resume = "") {
  return test::quiet_training(user, comm, resume);
}

void expect_close(const RunResult& n_ranks, const RunResult& single, double tolerance, const std::string& what) {
  ASSERT_EQ(single.step_losses.size(), 6u) << what;
  ASSERT_EQ(n_ranks.step_losses.size(), single.step_losses.size()) << what;
  for (size_t s = 0; s < single.step_losses.size(); ++s)
    EXPECT_NEAR(n_ranks.step_losses[s], single.step_losses[s], tolerance * single.step_losses[s])
        << what << ", step " << s + 1;
  ASSERT_EQ(n_ranks.epochs.size(), single.epochs.size());
  for (size_t e = 0; e < single.epochs.size(); ++e)
    EXPECT_NEAR(n_ranks.epochs[e].eval_loss, single.epochs[e].eval_loss, tolerance * single.epochs[e].eval_loss)
        << what << ", epoch " << e + 1;
  EXPECT_TRUE(n_ranks.replicas.identical) << what;
}

class GptEquivalence : public ::testing::TestWithParam<std::string> {};

TEST_P(GptEquivalence, NRanksReproduceOneProcessOnBothPathsAndWithAccumulation) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const std::string dtype = GetParam();
  const double tolerance = dtype == "float64" ? 1e-12 : 1e-5;
  const io::Json base = gpt(test::shared_token_files(comm, "gpt_" + dtype, kSamples, kPositions), dtype);
  const RunResult single = train(base, one);
  // It learns: the first loss is about ln 7 = 1.95 (small logits), and the chain's favourite
  // token is worth far less by the third epoch.
  EXPECT_NEAR(single.step_losses.front(), std::log(7.0), 0.05);
  EXPECT_LT(single.epochs.back().eval_loss, single.step_losses.front() - 0.1);
  for (const std::string path : {"mpi", "shm"})
    for (const int accumulate : {1, 2}) {
      if ((24 / comm.size()) % accumulate != 0) continue;
      io::Json user = base;
      user["reduce"]["algorithm"] = path;
      user["accumulate_steps"] = accumulate;
      const RunResult single_accumulated = accumulate == 1 ? single : train(user, one);
      expect_close(train(user, comm), single_accumulated, tolerance,
                   path + " path, accumulate_steps " + std::to_string(accumulate));
      if (accumulate == 2) expect_close(single_accumulated, single, dtype == "float64" ? 1e-12 : 1e-5, "accumulated");
    }
  if (comm.rank() == 0)
    std::printf("[gpt] %s N=%d: step 1 loss %.6f, final eval_loss %.6f\n", dtype.c_str(), comm.size(),
                single.step_losses.front(), single.epochs.back().eval_loss);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, GptEquivalence, ::testing::Values("float64", "float32"));

TEST(GptDeterministic, TheSameBitsAtEveryWorldSizeAndAfterAResumeAtAnother) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  io::Json user = gpt(test::shared_token_files(comm, "gpt_deterministic", kSamples, kPositions), "float32");
  user["deterministic"] = {{"chunks", 24}};
  // One process writes a checkpoint after every step (each rank its own, in its own directory).
  io::Json single_user = user;
  const std::string own = test::scratch_dir("gpt_deterministic_checkpoints");
  single_user["checkpoint"] = {{"dir", own}, {"every_steps", 1}, {"keep", 0}};
  const RunResult single = train(single_user, one);
  const RunResult n_ranks = train(user, comm);
  ASSERT_EQ(n_ranks.step_losses.size(), 6u);
  EXPECT_EQ(n_ranks.step_losses, single.step_losses);
  EXPECT_EQ(n_ranks.epochs.back().eval_loss, single.epochs.back().eval_loss);
  EXPECT_EQ(n_ranks.replicas.checksum, single.replicas.checksum);
  // Step 3 is the first batch of epoch 2: N ranks resume the one-process checkpoint there.
  const RunResult resumed = train(user, comm, checkpoint::checkpoint_path(own, 3));
  ASSERT_EQ(resumed.step_losses.size(), 3u);
  EXPECT_EQ(resumed.step_losses, std::vector<double>(single.step_losses.begin() + 3, single.step_losses.end()));
  EXPECT_EQ(resumed.replicas.checksum, single.replicas.checksum);
  EXPECT_TRUE(resumed.replicas.identical);
}

// Attention's tiled algorithm (kernels/attention_tiled.cpp) keeps deterministic mode's promise too:
// a sample's bits follow neither its batch nor the world size.
TEST(GptDeterministic, TiledAttentionGivesTheSameBitsAtEveryWorldSize) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  io::Json user = gpt(test::shared_token_files(comm, "gpt_deterministic_tiled", kSamples, kPositions), "float32");
  user["deterministic"] = {{"chunks", 24}};
  for (const int block : {2, 4}) user["model"]["layers"][block]["layers"][1]["algorithm"] = "tiled";
  const RunResult single = train(user, one);
  const RunResult n_ranks = train(user, comm);
  ASSERT_EQ(n_ranks.step_losses.size(), 6u);
  EXPECT_EQ(n_ranks.step_losses, single.step_losses);
  EXPECT_EQ(n_ranks.replicas.checksum, single.replicas.checksum);
  EXPECT_TRUE(n_ranks.replicas.identical);
  // And it is the tiled algorithm that ran: the naive one rounds apart somewhere in 6 steps.
  user["model"]["layers"][2]["layers"][1]["algorithm"] = "naive";
  user["model"]["layers"][4]["layers"][1]["algorithm"] = "naive";
  EXPECT_NE(train(user, one).replicas.checksum, single.replicas.checksum);
}

}  // namespace
}  // namespace mpiddp::train
