// Token data through the whole trainer: a bigram language model (an embedding whose row for
// token v is the logits of the token after v) on npy token ids with a class per position,
// trained at the launcher's world size N and in one process. The N-rank run reproduces the
// single-process run (float64, to 1e-12), and in deterministic mode bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/config/config.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../data/fixture_files.hpp"
#include "../support/scratch_dir.hpp"
#include "../support/token_files.hpp"

namespace mpiddp::train {
namespace {

constexpr int kPositions = 8, kSamples = 48;

std::string shared_token_files(distributed::Communicator& comm, const std::string& name) {
  return test::shared_token_files(comm, name, kSamples, kPositions);
}

enum class Source { kNpy, kText };

config::Config bigram(const std::string& dir, bool deterministic, Source from = Source::kNpy) {
  const std::string source =
      from == Source::kNpy ? R"({"source": "npy", "features": ")" + dir + R"(/x.npy", "targets": ")" + dir +
                                 R"(/y.npy", "classes": 7})"
                           : R"({"source": "text", "path": ")" + dir + R"(/input.txt", "block": 8})";
  io::Json user = io::Json::parse(R"({
    "seed": 5, "dtype": "float64", "epochs": 8,
    "model": {"layers": [{"type": "embedding", "vocab": 7, "dim": 7}]},
    "loss": "cross_entropy",
    "batch": {"global": 12},
    "optimizer": {"type": "adam", "lr": 0.1},
    "compute": {"gemm": "eigen"}
  })");
  user["data"]["train"] = io::Json::parse(source);
  user["data"]["eval"] = io::Json::parse(source);
  if (deterministic) user["deterministic"] = io::Json::parse(R"({"chunks": 12})");
  return config::parse_config(user);
}

TEST(TokenData, BigramTrainsAtNRanksAsInOneProcess) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const config::Config config = bigram(shared_token_files(comm, "token_equivalence"), false);
  const RunResult n_ranks = run_training(config, comm, {.quiet = true, .keep_history = true});
  const RunResult single = run_training(config, one, {.quiet = true, .keep_history = true});
  ASSERT_EQ(n_ranks.step_losses.size(), 32u);  // 48 samples / 12, 8 epochs
  ASSERT_EQ(single.step_losses.size(), 32u);
  for (size_t s = 0; s < single.step_losses.size(); ++s)
    EXPECT_NEAR(n_ranks.step_losses[s], single.step_losses[s], 1e-12 * single.step_losses[s]) << "step " << s + 1;
  ASSERT_EQ(n_ranks.epochs.size(), 8u);
  for (size_t e = 0; e < 8; ++e) {
    EXPECT_NEAR(n_ranks.epochs[e].eval_loss, single.epochs[e].eval_loss, 1e-12 * single.epochs[e].eval_loss);
    EXPECT_NEAR(*n_ranks.epochs[e].eval_accuracy, *single.epochs[e].eval_accuracy, 1e-12);
  }
  // It learns: N(0, 1) logits start near ln 7 + 1/2; the chain's favourite is worth far less.
  EXPECT_GT(single.step_losses.front(), 2.0);
  EXPECT_LT(single.epochs.back().eval_loss, single.step_losses.front() - 0.5);
  if (comm.rank() == 0)
    std::printf("[token data] N=%d: step 1 loss %.6f, final eval_loss %.6f, eval_accuracy %.4f\n", comm.size(),
                single.step_losses.front(), single.epochs.back().eval_loss, *single.epochs.back().eval_accuracy);
  EXPECT_GT(*single.epochs.back().eval_accuracy, 0.3);  // the favourite, predicted at each position
  EXPECT_TRUE(n_ranks.replicas.identical);
}

TEST(TokenData, DeterministicModeGivesTheSameBitsAtEveryWorldSize) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const config::Config config = bigram(shared_token_files(comm, "token_deterministic"), true);
  const RunResult n_ranks = run_training(config, comm, {.quiet = true, .keep_history = true});
  const RunResult single = run_training(config, one, {.quiet = true, .keep_history = true});
  ASSERT_EQ(n_ranks.step_losses.size(), single.step_losses.size());
  for (size_t s = 0; s < single.step_losses.size(); ++s)
    EXPECT_EQ(n_ranks.step_losses[s], single.step_losses[s]) << "step " << s + 1;
  EXPECT_EQ(n_ranks.epochs.back().eval_loss, single.epochs.back().eval_loss);
  EXPECT_EQ(*n_ranks.epochs.back().eval_accuracy, *single.epochs.back().eval_accuracy);
  EXPECT_EQ(n_ranks.replicas.checksum, single.replicas.checksum);
}

// The text source reads the same windows from one token array: the same losses, bit for bit,
// as the npy files, at every world size.
TEST(TokenData, TheTextSourceGivesTheNpyRun) {
  distributed::MpiCommunicator comm;
  const std::string dir = shared_token_files(comm, "token_text");
  const RunResult npy = run_training(bigram(dir, false), comm, {.quiet = true, .keep_history = true});
  const RunResult text = run_training(bigram(dir, false, Source::kText), comm, {.quiet = true, .keep_history = true});
  EXPECT_EQ(text.step_losses, npy.step_losses);
  EXPECT_EQ(text.replicas.checksum, npy.replicas.checksum);
  EXPECT_TRUE(text.replicas.identical);
}

// A class per sample (40 classes) and 4 classes per position of 10 give the same width, 40:
// the evaluation would read the eval set's targets as the training set's. A config error.
TEST(TokenData, EvaluationTargetsOfAnotherKindAreRefused) {
  distributed::LocalCommunicator one;
  const std::string dir = test::scratch_dir("eval_kind");
  const std::vector<float> x(8 * 4, 0.5f);
  data::testing::write_file(dir + "/x.npy", data::testing::npy_bytes("<f4", "(8, 4)", data::testing::bytes_of(x)));
  data::testing::write_file(dir + "/per_sample.npy",
                            data::testing::npy_bytes("<i4", "(8,)", data::testing::bytes_of(std::vector<int32_t>(8, 3))));
  data::testing::write_file(dir + "/per_position.npy",
                            data::testing::npy_bytes("<i4", "(8, 4)", data::testing::bytes_of(std::vector<int32_t>(32, 1))));
  io::Json user = io::Json::parse(R"({"model": {"layers": [{"type": "linear", "out": 40}]}, "loss": "cross_entropy",
                                      "batch": {"global": 4}})");
  user["data"]["train"] = {{"source", "npy"}, {"features", dir + "/x.npy"}, {"targets", dir + "/per_sample.npy"},
                           {"classes", 40}};
  user["data"]["eval"] = {{"source", "npy"}, {"features", dir + "/x.npy"}, {"targets", dir + "/per_position.npy"},
                          {"classes", 10}};
  try {
    Trainer<float> trainer(config::parse_config(user), one);
    ADD_FAILURE() << "no ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.eval: its targets: 4 per sample"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpiddp::train
