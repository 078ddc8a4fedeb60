// data.train.augment through the whole trainer at the launcher's world size N: a small CNN
// on 1 x 6 x 6 images with random_crop, horizontal_flip and gaussian_noise trains at N ranks
// as one process does (float64 to 1e-12 per step), bit for bit in deterministic mode, also
// when a one-process checkpoint written mid-epoch resumes at N, and bit for bit when a run
// at N resumes its own mid-epoch checkpoint: every draw depends on (seed, epoch, sample
// index, transform, value), never on the rank, the batch or a generator's state
// (Note [the augmentation counter] in src/data/augment.cpp). Evaluation is never augmented.
// Gathering the next batch on a worker thread (prefetch) changes no bit of any of it.
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

namespace mpiddp::train {
namespace {

// 96 samples of 1 x 6 x 6 "images" (synthetic_classification read through
// model.input_shape), 3 classes, global batch 24: 4 steps per epoch, 3 epochs; 24, 12 or 8
// samples per rank at N = 1, 2, 3, and 12 chunks of 2 samples in deterministic mode.
io::Json augmented_cnn(const std::string& dtype) {
  io::Json user = io::Json::parse(R"({
    "seed": 3, "epochs": 3,
    "model": {"input_shape": [1, 6, 6], "layers": [
      {"type": "conv2d", "out": 4, "kernel": 3, "padding": 1},
      {"type": "relu"},
      {"type": "flatten"},
      {"type": "linear", "out": 3}]},
    "loss": "cross_entropy",
    "data": {"train": {"source": "synthetic_classification", "samples": 96, "features": 36, "classes": 3,
                       "augment": [{"type": "random_crop", "padding": 1},
                                   {"type": "horizontal_flip", "p": 0.5},
                                   {"type": "gaussian_noise", "std": 0.1}]},
             "eval": {"source": "synthetic_classification", "samples": 48, "features": 36, "classes": 3}},
    "batch": {"global": 24},
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
    "compute": {"gemm": "eigen"}
  })");
  user["dtype"] = dtype;
  return user;
}

RunResult train(const io::Json& user, distributed::Communicator& comm, const std::string& resume = "") {
  return test::quiet_training(user, comm, resume);
}

std::vector<double> after(const std::vector<double>& losses, size_t steps) {
  return {losses.begin() + static_cast<std::ptrdiff_t>(steps), losses.end()};
}

TEST(AugmentEquivalence, NRanksReproduceOneProcessInFloat64) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const io::Json user = augmented_cnn("float64");
  const RunResult single = train(user, one);
  const RunResult n_ranks = train(user, comm);
  ASSERT_EQ(single.step_losses.size(), 12u);
  ASSERT_EQ(n_ranks.step_losses.size(), single.step_losses.size());
  for (size_t s = 0; s < single.step_losses.size(); ++s)
    EXPECT_NEAR(n_ranks.step_losses[s], single.step_losses[s], 1e-12 * single.step_losses[s])
        << "step " << s + 1 << " at N=" << comm.size();
  EXPECT_TRUE(n_ranks.replicas.identical);
  // The augmentation is there: without it the same run takes other steps.
  io::Json plain = user;
  plain["data"]["train"].erase("augment");
  const RunResult unaugmented = train(plain, one);
  for (size_t s = 0; s < single.step_losses.size(); ++s)
    EXPECT_NE(unaugmented.step_losses[s], single.step_losses[s]) << "step " << s + 1;
  if (comm.rank() == 0)
    std::printf("[augment] N=%d float64: step 1 loss %.12f (unaugmented %.12f), final eval_loss %.6f\n",
                comm.size(), single.step_losses.front(), unaugmented.step_losses.front(),
                single.epochs.back().eval_loss);
}

TEST(AugmentEquivalence, DeterministicModeGivesTheSameBitsAtEveryNAndAfterAResumeAtAnother) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  io::Json user = augmented_cnn("float32");
  user["deterministic"] = {{"chunks", 12}};
  // One process writes a checkpoint after every step (each rank its own, in its own directory).
  io::Json single_user = user;
  const std::string own = test::scratch_dir("augment_deterministic_checkpoints");
  single_user["checkpoint"] = {{"dir", own}, {"every_steps", 1}, {"keep", 0}};
  const RunResult single = train(single_user, one);
  const RunResult n_ranks = train(user, comm);
  ASSERT_EQ(n_ranks.step_losses.size(), 12u);
  EXPECT_EQ(n_ranks.step_losses, single.step_losses);
  EXPECT_EQ(n_ranks.epochs.back().eval_loss, single.epochs.back().eval_loss);
  EXPECT_EQ(n_ranks.replicas.checksum, single.replicas.checksum);
  // Step 6 is batch 2 of epoch 2: N ranks resume the one-process checkpoint mid-epoch.
  const RunResult resumed = train(user, comm, checkpoint::checkpoint_path(own, 6));
  ASSERT_EQ(resumed.step_losses.size(), 6u);
  EXPECT_EQ(resumed.step_losses, after(single.step_losses, 6));
  EXPECT_EQ(resumed.replicas.checksum, single.replicas.checksum);
  EXPECT_TRUE(resumed.replicas.identical);
}

TEST(AugmentEquivalence, AMidEpochResumeAtTheSameNRepeatsTheRunBitForBit) {
  distributed::MpiCommunicator comm;
  const std::string dir = test::shared_scratch_dir(comm, "augment_resume");
  io::Json user = augmented_cnn("float32");
  user["checkpoint"] = {{"dir", dir}, {"every_steps", 3}, {"keep", 0}};
  const RunResult straight = train(user, comm);
  // Step 6 is batch 2 of epoch 2.
  const RunResult resumed = train(user, comm, checkpoint::checkpoint_path(dir, 6));
  ASSERT_EQ(resumed.step_losses.size(), 6u);
  EXPECT_EQ(resumed.step_losses, after(straight.step_losses, 6));
  EXPECT_EQ(resumed.epochs.back().eval_loss, straight.epochs.back().eval_loss);
  EXPECT_EQ(resumed.replicas.checksum, straight.replicas.checksum);
}

TEST(AugmentEquivalence, EvaluationSeesTheDataAsItIs) {
  // With lr 0 the weights never move: the augmented run's evaluations, on data.eval and on the
  // training set, are the unaugmented run's bit for bit, while its training steps are not.
  distributed::MpiCommunicator comm;
  io::Json user = augmented_cnn("float64");
  user["optimizer"]["lr"] = 0.0;
  user["epochs"] = 1;
  io::Json plain = user;
  plain["data"]["train"].erase("augment");
  const RunResult augmented = train(user, comm), unaugmented = train(plain, comm);
  ASSERT_EQ(augmented.epochs.size(), 1u);
  EXPECT_EQ(augmented.epochs[0].eval_loss, unaugmented.epochs[0].eval_loss);
  EXPECT_EQ(augmented.epochs[0].train_loss, unaugmented.epochs[0].train_loss);
  EXPECT_EQ(augmented.replicas.checksum, unaugmented.replicas.checksum);
  EXPECT_NE(augmented.step_losses[0], unaugmented.step_losses[0]);
}

// `prefetch` (the next batch gathered and augmented on a worker thread) changes no bit at N:
// micro-batches, a shuffled sampler whose epoch ends in a partial batch (100 samples), and
// evaluations between steps while a batch is in flight; deterministic mode with a rank's
// chunks interleaved (12 chunks) and whole (N chunks); and a mid-epoch resume, with prefetch
// switched either way (a performance key: it may change on resume).
TEST(AugmentEquivalence, PrefetchChangesNoBit) {
  distributed::MpiCommunicator comm;
  auto with_prefetch = [](io::Json user, bool prefetch) {
    user["prefetch"] = prefetch;
    return user;
  };
  auto expect_same = [&](const RunResult& on, const RunResult& off, const std::string& what) {
    ASSERT_FALSE(off.step_losses.empty()) << what;
    EXPECT_EQ(on.step_losses, off.step_losses) << what << " at N=" << comm.size();
    EXPECT_EQ(on.replicas.checksum, off.replicas.checksum) << what << " at N=" << comm.size();
    EXPECT_EQ(on.epochs.back().eval_loss, off.epochs.back().eval_loss) << what << " at N=" << comm.size();
    EXPECT_TRUE(on.replicas.identical) << what;
  };
  io::Json user = augmented_cnn("float32");
  user["data"]["train"]["samples"] = 100;  // 5 steps an epoch, the last of 4 samples
  user["accumulate_steps"] = 2;
  user["eval"] = {{"every_steps", 3}};
  const RunResult on = train(with_prefetch(user, true), comm);
  expect_same(on, train(with_prefetch(user, false), comm), "accumulate_steps 2");
  for (int chunks : {12, comm.size()}) {
    io::Json exact = augmented_cnn("float32");
    exact["deterministic"] = {{"chunks", chunks}};
    expect_same(train(with_prefetch(exact, true), comm), train(with_prefetch(exact, false), comm),
                "deterministic, " + std::to_string(chunks) + " chunks");
  }
  // The checkpoint after step 6 resumes at batch 1 of epoch 2.
  const std::string dir = test::shared_scratch_dir(comm, "augment_prefetch");
  io::Json saving = with_prefetch(user, true);
  saving["checkpoint"] = {{"dir", dir}, {"every_steps", 3}, {"keep", 0}};
  const RunResult straight = train(saving, comm);
  EXPECT_EQ(straight.step_losses, on.step_losses);
  for (bool prefetch : {true, false}) {
    const RunResult resumed = train(with_prefetch(saving, prefetch), comm, checkpoint::checkpoint_path(dir, 6));
    ASSERT_EQ(resumed.step_losses.size(), 9u);
    EXPECT_EQ(resumed.step_losses, after(straight.step_losses, 6)) << "resumed with prefetch " << prefetch;
    EXPECT_EQ(resumed.replicas.checksum, straight.replicas.checksum) << "resumed with prefetch " << prefetch;
  }
}

}  // namespace
}  // namespace mpiddp::train
