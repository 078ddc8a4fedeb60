// Evaluations every N steps, the best checkpoint and early stopping through the whole trainer
// at the launcher's world size N (1, 2 and 3 in CI), against one process: the evaluations
// of eval.every_steps on a prefix of the evaluation set (eval.max_samples) within 1e-12 in
// float64, bit for bit in deterministic mode; early stopping ending every rank after the same
// step, with the watchdog as the stall detector that turns a hang into a failure (exit 7);
// and a run resumed mid-way, or from its best checkpoint, keeping and stopping as the
// uninterrupted one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/io/safetensors.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/quiet_training.hpp"
#include "../support/scratch_dir.hpp"

namespace mpiddp::train {
namespace {

// 192 blobs in 3 classes, a global batch of 24: 8 steps per epoch, 3 epochs. Evaluations after
// every 3rd step on the first 50 of 100 evaluation samples, and at each epoch's end.
io::Json classifier(const std::string& dtype) {
  io::Json user = io::Json::parse(R"({
    "seed": 5, "epochs": 3,
    "model": {"inputs": 6, "layers": [{"type": "linear", "out": 16}, {"type": "tanh"},
                                      {"type": "linear", "out": 3}]},
    "loss": "cross_entropy",
    "data": {"train": {"source": "synthetic_classification", "samples": 192, "features": 6, "classes": 3,
                       "generator": "blobs"},
             "eval": {"source": "synthetic_classification", "samples": 100, "features": 6, "classes": 3,
                      "generator": "blobs"}},
    "batch": {"global": 24},
    "optimizer": {"type": "sgd", "lr": 0.02, "momentum": 0.9},
    "eval": {"every_steps": 3, "max_samples": 50},
    "watchdog": {"timeout_s": 60},
    "compute": {"gemm": "eigen"}
  })");
  user["dtype"] = dtype;
  return user;
}

RunResult train(const io::Json& user, distributed::Communicator& comm, const std::string& resume = "") {
  return test::quiet_training(user, comm, resume);
}

TEST(EvaluationEveryNSteps, NRanksReproduceOneProcess) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const io::Json user = classifier("float64");
  const RunResult single = train(user, one);
  // Steps 3, 6, ..., 24: eight evaluations; an epoch's end at 8 and 16 is not a multiple of 3.
  ASSERT_EQ(single.evaluations.size(), 8u);
  for (size_t i = 0; i < single.evaluations.size(); ++i) {
    EXPECT_EQ(single.evaluations[i].step, static_cast<int64_t>(3 * (i + 1)));
    EXPECT_EQ(single.evaluations[i].epoch, (3 * static_cast<int64_t>(i) + 2) / 8 + 1);  // step 3(i+1)
    ASSERT_TRUE(single.evaluations[i].eval_accuracy.has_value());
    // 50 samples: the accuracy is a count of them.
    const double correct = *single.evaluations[i].eval_accuracy * 50;
    EXPECT_NEAR(correct, std::round(correct), 1e-9);
  }
  // Step 24 ends the run: its evaluation is the last epoch's, taken once.
  EXPECT_EQ(single.evaluations.back().eval_loss, single.epochs.back().eval_loss);
  EXPECT_LT(single.evaluations.back().eval_loss, single.evaluations.front().eval_loss - 0.1);
  const RunResult n_ranks = train(user, comm);
  ASSERT_EQ(n_ranks.evaluations.size(), single.evaluations.size());
  for (size_t i = 0; i < single.evaluations.size(); ++i) {
    EXPECT_EQ(n_ranks.evaluations[i].step, single.evaluations[i].step);
    EXPECT_NEAR(n_ranks.evaluations[i].eval_loss, single.evaluations[i].eval_loss,
                1e-12 * single.evaluations[i].eval_loss);
    EXPECT_EQ(n_ranks.evaluations[i].eval_accuracy, single.evaluations[i].eval_accuracy);
  }
}

TEST(EvaluationEveryNSteps, DeterministicModeGivesTheSameBitsAtEveryWorldSize) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  io::Json user = classifier("float32");
  user["deterministic"] = {{"chunks", 24}};
  const RunResult single = train(user, one);
  const RunResult n_ranks = train(user, comm);
  ASSERT_EQ(single.evaluations.size(), 8u);
  ASSERT_EQ(n_ranks.evaluations.size(), 8u);
  for (size_t i = 0; i < single.evaluations.size(); ++i) {
    EXPECT_EQ(n_ranks.evaluations[i].eval_loss, single.evaluations[i].eval_loss) << "evaluation " << i;
    EXPECT_EQ(n_ranks.evaluations[i].eval_accuracy, single.evaluations[i].eval_accuracy);
  }
  EXPECT_EQ(n_ranks.replicas.checksum, single.replicas.checksum);
}

// Patience 2 and a min_delta the loss stops beating part-way: the run ends early, after the
// step one process ends after, on every rank.
io::Json stopping(const std::string& dtype) {
  io::Json user = classifier(dtype);
  user["epochs"] = 6;
  user["early_stopping"] = {{"metric", "eval_loss"}, {"patience", 2}, {"min_delta", 0.01}};
  return user;
}

TEST(EarlyStopping, EveryRankStopsAfterTheStepOneProcessStopsAfter) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const io::Json user = stopping("float64");
  const RunResult single = train(user, one);
  ASSERT_GT(single.early_stop_step, 0) << "the example must stop early";
  EXPECT_LT(single.early_stop_step, 48);
  EXPECT_EQ(single.steps, single.early_stop_step);
  const RunResult n_ranks = train(user, comm);
  EXPECT_EQ(n_ranks.early_stop_step, single.early_stop_step);
  EXPECT_EQ(n_ranks.steps, single.steps);
  // Every rank, not only rank 0, left the loop after that step.
  for (const uint64_t stopped : comm.allgather(static_cast<uint64_t>(n_ranks.early_stop_step)))
    EXPECT_EQ(stopped, static_cast<uint64_t>(single.early_stop_step));
  EXPECT_TRUE(n_ranks.replicas.identical);
  if (comm.rank() == 0)
    std::printf("[early stopping] N=%d: stopped after step %lld of 48\n", comm.size(),
                static_cast<long long>(single.early_stop_step));
}

int64_t checkpoint_step(const std::string& path) {
  const io::SafetensorsFile file = io::read_safetensors(path, mpiddp::kExitCheckpoint);
  return io::Json::parse(file.metadata().at("mpiddp_checkpoint")).at("step").get<int64_t>();
}

TEST(EarlyStopping, AResumedRunKeepsTheBestAndStopsAsTheUninterruptedOne) {
  distributed::MpiCommunicator comm;
  io::Json user = stopping("float32");
  user["deterministic"] = {{"chunks", 24}};
  const std::string dir = test::shared_scratch_dir(comm, "evaluation_resume");
  user["checkpoint"] = {{"dir", dir}, {"every_steps", 4}, {"keep", 0}, {"keep_best", "eval_loss"}};
  const RunResult whole = train(user, comm);
  ASSERT_GT(whole.early_stop_step, 8);
  // The best checkpoint is the evaluation with the lowest eval_loss (the first of equals).
  std::vector<std::pair<int64_t, double>> evaluations;
  for (const auto& e : whole.evaluations) evaluations.emplace_back(e.step, e.eval_loss);
  for (const auto& e : whole.epochs) evaluations.emplace_back(e.epoch * 8, e.eval_loss);
  std::sort(evaluations.begin(), evaluations.end());
  evaluations.erase(std::unique(evaluations.begin(), evaluations.end(),
                                [](const auto& a, const auto& b) { return a.first == b.first; }),
                    evaluations.end());
  const auto best = std::min_element(evaluations.begin(), evaluations.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_EQ(checkpoint_step(checkpoint::best_checkpoint_path(dir)), best->first);
  // Resumed from step 8, before the best was found and before the stop: the same stop, the
  // same bits, the same best checkpoint.
  const RunResult resumed = train(user, comm, checkpoint::checkpoint_path(dir, 8));
  EXPECT_EQ(resumed.early_stop_step, whole.early_stop_step);
  EXPECT_EQ(resumed.replicas.checksum, whole.replicas.checksum);
  EXPECT_EQ(checkpoint_step(checkpoint::best_checkpoint_path(dir)), best->first);
  // --resume best continues from the best evaluation's step, with its trackers: it stops at
  // the same step again.
  const RunResult from_best = train(user, comm, "best");
  EXPECT_EQ(from_best.early_stop_step, whole.early_stop_step);
  EXPECT_EQ(from_best.replicas.checksum, whole.replicas.checksum);
}


// The average of the weights (ema.decay 0.9): its evaluations at N ranks, with the optimizer
// whole or sharded (each rank then holds its part of the average), against one process; the
// weights file beside save_weights'; in deterministic mode the same bits at every N and
// after a resume.
// The tensors' bytes of a safetensors file (its metadata names the run's own paths).
std::vector<char> tensor_bytes(const std::string& path) {
  const io::SafetensorsFile file = io::read_safetensors(path, mpiddp::kExitData);
  return {file.data(), file.data() + file.data_bytes()};
}

TEST(Ema, NRanksWholeOrShardedReproduceOneProcess) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  io::Json user = classifier("float64");
  user["ema"] = {{"decay", 0.9}};
  // Every rank runs the one process too: each writes its own files.
  const std::string dir = test::scratch_dir("ema_weights");
  io::Json single_user = user;
  single_user["save_weights"] = dir + "/single.safetensors";
  const RunResult single = train(single_user, one);
  ASSERT_EQ(single.epochs.size(), 3u);
  for (const auto& e : single.epochs) {
    ASSERT_TRUE(e.eval_loss_ema.has_value());
    EXPECT_NE(*e.eval_loss_ema, e.eval_loss);  // the average is not the weights
  }
  ASSERT_TRUE(single.evaluations.front().eval_loss_ema.has_value());
  // The weights file and the average's beside it, with the same names.
  const io::SafetensorsFile weights = io::read_safetensors(dir + "/single.safetensors", mpiddp::kExitData);
  const io::SafetensorsFile average = io::read_safetensors(dir + "/single.ema.safetensors", mpiddp::kExitData);
  EXPECT_NE(tensor_bytes(dir + "/single.safetensors"), tensor_bytes(dir + "/single.ema.safetensors"));
  ASSERT_EQ(average.tensors().size(), weights.tensors().size());
  for (size_t t = 0; t < weights.tensors().size(); ++t) EXPECT_EQ(average.tensors()[t].name, weights.tensors()[t].name);
  // Made once: rank 0 empties the directory when it makes it, which must not happen while
  // another rank still reads the files of the iteration before.
  const std::string shared = test::shared_scratch_dir(comm, "ema_weights_n");
  for (const bool sharded : {false, true}) {
    io::Json n_user = user;
    n_user["reduce"]["shard_optimizer"] = sharded;
    const std::string what = sharded ? "sharded" : "whole";
    n_user["save_weights"] = shared + "/" + what + ".safetensors";
    const RunResult n_ranks = train(n_user, comm);
    comm.barrier();  // rank 0 writes the files after the run's last collective
    // The average rank 0 writes: gathered from the ranks' parts when sharded.
    const std::vector<char> n_average = tensor_bytes(shared + "/" + what + ".ema.safetensors"),
                            one_average = tensor_bytes(dir + "/single.ema.safetensors");
    ASSERT_EQ(n_average.size(), one_average.size());
    for (size_t i = 0; i < n_average.size(); i += sizeof(double)) {
      double a, b;
      std::memcpy(&a, n_average.data() + i, sizeof a);
      std::memcpy(&b, one_average.data() + i, sizeof b);
      ASSERT_NEAR(a, b, 1e-12 * (1.0 + std::abs(b))) << what << ", average value " << i / sizeof(double);
    }
    for (size_t e = 0; e < single.epochs.size(); ++e)
      EXPECT_NEAR(*n_ranks.epochs[e].eval_loss_ema, *single.epochs[e].eval_loss_ema,
                  1e-12 * *single.epochs[e].eval_loss_ema) << what << ", epoch " << e + 1;
    for (size_t i = 0; i < single.evaluations.size(); ++i)
      EXPECT_NEAR(*n_ranks.evaluations[i].eval_loss_ema, *single.evaluations[i].eval_loss_ema,
                  1e-12 * *single.evaluations[i].eval_loss_ema) << what << ", evaluation " << i;
    EXPECT_TRUE(n_ranks.replicas.identical) << what;
  }
}

TEST(Ema, DeterministicModeTheSameBitsAtEveryWorldSizeAndAfterAResume) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  io::Json user = classifier("float32");
  user["deterministic"] = {{"chunks", 24}};
  user["ema"] = {{"decay", 0.9}, {"every_steps", 2}};
  const std::string dir = test::shared_scratch_dir(comm, "ema_deterministic");
  io::Json single_user = user;
  single_user["save_weights"] = dir + "/single.safetensors";
  single_user["checkpoint"] = {{"dir", dir + "/single_checkpoints"}, {"every_steps", 1}, {"keep", 0}};
  const RunResult single = one.rank() == 0 && comm.rank() == 0 ? train(single_user, one) : RunResult{};
  comm.barrier();
  io::Json n_user = user;
  n_user["save_weights"] = dir + "/n.safetensors";
  const RunResult n_ranks = train(n_user, comm);
  comm.barrier();  // rank 0 writes the files after the run's last collective
  const std::vector<char> single_average = tensor_bytes(dir + "/single.ema.safetensors");
  ASSERT_FALSE(single_average.empty());
  EXPECT_EQ(tensor_bytes(dir + "/n.ema.safetensors"), single_average);
  if (comm.rank() == 0) {
    ASSERT_EQ(single.epochs.size(), 3u);
    for (size_t e = 0; e < single.epochs.size(); ++e)
      EXPECT_EQ(n_ranks.epochs[e].eval_loss_ema, single.epochs[e].eval_loss_ema) << "epoch " << e + 1;
  }
  // N ranks resume the one-process checkpoint after step 11 (mid-epoch 2, an odd step of
  // every_steps 2): the same average at the end, bit for bit.
  n_user["save_weights"] = dir + "/resumed.safetensors";
  train(n_user, comm, checkpoint::checkpoint_path(dir + "/single_checkpoints", 11));
  comm.barrier();
  EXPECT_EQ(tensor_bytes(dir + "/resumed.ema.safetensors"), single_average);
}

}  // namespace
}  // namespace mpiddp::train
