// The promise for image and residual networks: a model with every layer type (conv2d,
// batchnorm2d, relu, residual, maxpool2d, dropout, flatten, linear) trains at the
// launcher's world size N exactly like one process with the same global batch, on every
// reduction path, because BatchNorm takes the global batch's statistics (batchnorm.sync)
// and dropout's masks depend on a sample's global position, not on its rank.
//
// As in equivalence_test.cpp, every rank also runs the one-process reference itself.
#include <gtest/gtest.h>

#include <cmath>

#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/reduction_path.hpp"

namespace mpiddp::train {
namespace {

using test::Path;
using test::path_name;

// 96 samples of 2 x 6 x 6 "images" (synthetic_classification read through model.input_shape),
// 3 classes, global batch 24: 24, 12, 8 or 6 samples per rank at N = 1, 2, 3, 4.
io::Json cnn_experiment(const std::string& dtype) {
  return io::Json::parse(R"({
    "seed": 5,
    "dtype": ")" + dtype + R"(",
    "model": {"input_shape": [2, 6, 6], "layers": [
      {"type": "conv2d", "out": 4, "kernel": 3, "padding": 1},
      {"type": "batchnorm2d"},
      {"type": "relu"},
      {"type": "residual", "layers": [
        {"type": "conv2d", "out": 4, "kernel": 3, "padding": 1, "bias": false},
        {"type": "batchnorm2d", "momentum": 0.2},
        {"type": "relu"}]},
      {"type": "maxpool2d", "kernel": 2},
      {"type": "dropout", "p": 0.25},
      {"type": "flatten"},
      {"type": "linear", "out": 3}]},
    "loss": "cross_entropy",
    "data": {"train": {"source": "synthetic_classification", "samples": 96, "features": 72,
                       "classes": 3}},
    "batch": {"global": 24},
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
    "epochs": 3
  })");
}

config::Config experiment(const std::string& dtype, const Path& path, bool batchnorm_sync = true) {
  io::Json user = cnn_experiment(dtype);
  test::apply_path(user, path, 0.001, 0.002);
  if (!batchnorm_sync) config::apply_override(user, "batchnorm.sync=false");
  return config::parse_config(user);
}

// The largest relative difference of the step losses and the epoch eval losses.
double largest_difference(const RunResult& a, const RunResult& b) {
  double worst = 0.0;
  for (size_t s = 0; s < b.step_losses.size(); ++s)
    worst = std::max(worst, std::fabs(a.step_losses[s] - b.step_losses[s]) / std::fabs(b.step_losses[s]));
  for (size_t e = 0; e < b.epochs.size(); ++e)
    worst = std::max(worst, std::fabs(a.epochs[e].eval_loss - b.epochs[e].eval_loss) /
                                std::fabs(b.epochs[e].eval_loss));
  return worst;
}

class CnnEquivalence : public ::testing::TestWithParam<Path> {};

void check_training_equivalence(const Path& path, const std::string& dtype, double rtol) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const config::Config config = experiment(dtype, path);
  const RunResult n_ranks = run_training(config, comm, {.quiet = true});
  const RunResult single = run_training(config, one, {.quiet = true});
  ASSERT_EQ(n_ranks.step_losses.size(), single.step_losses.size());
  ASSERT_EQ(n_ranks.epochs.size(), single.epochs.size());
  ASSERT_EQ(single.step_losses.size(), 12u);  // 96 / 24 steps per epoch, 3 epochs
  const double worst = largest_difference(n_ranks, single);
  EXPECT_LE(worst, rtol) << "N=" << comm.size();
  for (size_t e = 0; e < single.epochs.size(); ++e)
    EXPECT_EQ(n_ranks.epochs[e].eval_accuracy, single.epochs[e].eval_accuracy) << "epoch " << e + 1;
  EXPECT_TRUE(n_ranks.replicas.identical);
  EXPECT_EQ(n_ranks.replicas.max_diff, 0.0);
  // The run learns: the loss of the last epoch is below the first's.
  EXPECT_LT(single.epochs.back().eval_loss, single.epochs.front().eval_loss);
  if (comm.rank() == 0)
    std::printf("[cnn equivalence] N=%d %s %s: largest relative difference %.3g\n", comm.size(),
                path_name({path, 0}).c_str(), dtype.c_str(), worst);
}

TEST_P(CnnEquivalence, TrainingFloat32) { check_training_equivalence(GetParam(), "float32", 1e-5); }
TEST_P(CnnEquivalence, TrainingFloat64) { check_training_equivalence(GetParam(), "float64", 1e-12); }

INSTANTIATE_TEST_SUITE_P(ReductionPaths, CnnEquivalence,
                         ::testing::Values(Path{"mpi", true, 1}, Path{"mpi", false, 1},
                                           Path{"shm", true, 1}, Path{"shm", false, 2}),
                         path_name);

// batchnorm.sync=false is PyTorch DDP on CPU: each rank normalises over its own shard and
// rank 0's buffers are broadcast. The result then depends on N; the test measures by how
// much, so docs/architectures.md can show it, and checks that it is not hidden.
TEST(CnnEquivalenceUnsynced, ShardStatisticsChangeTheResultWithTheWorldSize) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const Path path{"auto", true, 1};
  const RunResult single = run_training(experiment("float64", path), one, {.quiet = true});
  const RunResult unsynced = run_training(experiment("float64", path, false), comm, {.quiet = true});
  const double worst = largest_difference(unsynced, single);
  if (comm.size() == 1) {
    EXPECT_LE(worst, 1e-12);  // one rank: its shard is the global batch
  } else {
    EXPECT_GT(worst, 1e-6) << "shard statistics should differ from the global batch's";
    EXPECT_TRUE(unsynced.replicas.identical);  // the gradients are still averaged
  }
  if (comm.rank() == 0)
    std::printf("[batchnorm.sync=false] N=%d float64: largest relative difference from one "
                "process %.3g (final eval_loss %.10g vs %.10g)\n",
                comm.size(), worst, unsynced.epochs.back().eval_loss, single.epochs.back().eval_loss);
}

}  // namespace
}  // namespace mpiddp::train
