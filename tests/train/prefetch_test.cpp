// `prefetch` changes no bit: the trainer, in one process, gives the same step losses,
// evaluations and parameter checksum with the next batch gathered on the worker as without,
// on augmented images, with micro-batches whose parts lie on and off the buffers' alignment,
// a shuffled sampler, the epoch's last partial batch, evaluations between steps while a batch
// is in flight, sync off and deterministic mode; and the batch pipeline does take its batches from
// the worker (Note [the prefetched batch] in src/train/batch_prefetcher.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/data/source.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/nn/loss_registry.hpp"
#include "mpiddp/record/step_profile.hpp"
#include "mpiddp/train/batch_pipeline.hpp"
#include "mpiddp/train/step_strategy.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {
namespace {

// A small CNN on 1 x 6 x 6 images (36 values: a float column is 144 bytes, so a micro-batch
// at column 12 lies on a 64-byte boundary and one at column 6 or 2 does not) with the three
// transforms; 100 samples, global batch 24: four steps of 24 and a last one of 4.
io::Json augmented_images() {
  return io::Json::parse(R"({
    "seed": 5, "epochs": 3, "dtype": "float32",
    "model": {"input_shape": [1, 6, 6], "layers": [
      {"type": "conv2d", "out": 4, "kernel": 3, "padding": 1},
      {"type": "relu"},
      {"type": "flatten"},
      {"type": "linear", "out": 3}]},
    "loss": "cross_entropy",
    "data": {"train": {"source": "synthetic_classification", "samples": 100, "features": 36, "classes": 3,
                       "augment": [{"type": "random_crop", "padding": 1},
                                   {"type": "horizontal_flip", "p": 0.5},
                                   {"type": "gaussian_noise", "std": 0.1}]}},
    "batch": {"global": 24},
    "optimizer": {"type": "sgd", "lr": 0.05, "momentum": 0.9},
    "eval": {"every_steps": 3},
    "compute": {"gemm": "eigen"}
  })");
}

RunResult train_with_prefetch(io::Json user, bool prefetch) {
  user["prefetch"] = prefetch;
  distributed::LocalCommunicator comm;
  return run_training(config::parse_config(user), comm, {.quiet = true});
}

void expect_same_run(const io::Json& user, const std::string& what) {
  const RunResult on = train_with_prefetch(user, true), off = train_with_prefetch(user, false);
  ASSERT_FALSE(off.step_losses.empty()) << what;
  EXPECT_EQ(on.step_losses, off.step_losses) << what;
  EXPECT_EQ(on.replicas.checksum, off.replicas.checksum) << what;
  ASSERT_EQ(on.epochs.size(), off.epochs.size()) << what;
  for (size_t e = 0; e < on.epochs.size(); ++e) {
    EXPECT_EQ(on.epochs[e].eval_loss, off.epochs[e].eval_loss) << what << ", epoch " << e + 1;
    EXPECT_EQ(on.epochs[e].train_loss, off.epochs[e].train_loss) << what << ", epoch " << e + 1;
  }
  ASSERT_EQ(on.evaluations.size(), off.evaluations.size()) << what;
  for (size_t i = 0; i < on.evaluations.size(); ++i)
    EXPECT_EQ(on.evaluations[i].eval_loss, off.evaluations[i].eval_loss) << what << ", evaluation " << i;
}

TEST(Prefetch, ChangesNoBitOfAMicroBatchedRun) {
  // accumulate_steps 2: parts at column 12 (in place) and, in the last step, column 2
  // (moved); 3: columns 8 and 16 (in place), 2 and 3 (moved); a global batch of 12 with 2:
  // column 6 (moved) in every step.
  for (const char* dtype : {"float32", "float64"})
    for (int accumulate : {1, 2, 3}) {
      io::Json user = augmented_images();
      user["dtype"] = dtype;
      user["accumulate_steps"] = accumulate;
      expect_same_run(user, std::string(dtype) + ", accumulate_steps " + std::to_string(accumulate));
    }
  io::Json small = augmented_images();
  small["batch"]["global"] = 12;
  small["accumulate_steps"] = 2;
  expect_same_run(small, "global batch 12, accumulate_steps 2");
  io::Json local = augmented_images();
  local["sync"] = false;
  local["accumulate_steps"] = 2;
  expect_same_run(local, "sync off");
  io::Json in_order = augmented_images();
  in_order["sampler"] = {{"shuffle", false}, {"drop_last", true}};
  expect_same_run(in_order, "no shuffle, drop_last");
}

TEST(Prefetch, ChangesNoBitInDeterministicMode) {
  // 12 chunks: a rank's chunks interleave the step's samples, and each gathers on its own;
  // 1 chunk: the step's whole batch, which the worker gathered.
  for (int chunks : {12, 1}) {
    io::Json user = augmented_images();
    user["data"]["train"]["samples"] = 96;
    user["deterministic"] = {{"chunks", chunks}};
    expect_same_run(user, "deterministic, " + std::to_string(chunks) + " chunks");
  }
}

TEST(Prefetch, IsReadOnlyWhenGivenAndMayChangeOnResume) {
  const config::Config plain = config::parse_config(augmented_images());
  EXPECT_TRUE(plain.prefetch);
  EXPECT_FALSE(plain.resolved.contains("prefetch"));  // the resolved config (and its hash) as before
  io::Json user = augmented_images();
  user["prefetch"] = false;
  const config::Config off = config::parse_config(user);
  EXPECT_FALSE(off.prefetch);
  EXPECT_EQ(off.resolved["prefetch"], false);
  EXPECT_EQ(checkpoint::resume_config(off), checkpoint::resume_config(plain));
  user["prefetch"] = 1;
  EXPECT_THROW(config::parse_config(user), ConfigError);
}

// The batch pipeline on its own, driven as the loop and the micro-batched step drive it: with
// prefetch every step after an epoch's first takes its batch from the worker (its two
// micro-batches: the first takes it, the second reads its part), and every loss is the bits
// of the synchronous gather's.
TEST(Prefetch, TheReplicaTakesEachStepAfterAnEpochsFirstFromTheWorker) {
  io::Json user = augmented_images();
  const config::Config config = config::parse_config(user);
  data::Dataset<float> train = data::load_source<float>(config.train_data, config.seed, "train");
  const Index batch = config.per_rank_batch(1);
  nn::Model<float> model(config::model_input_shape(config, train.shape, train.features, "data.train"),
                         config.layers, batch, kReservedSlots);
  model.initialize(config.seed);
  const std::unique_ptr<nn::Loss<float>> loss = nn::build_loss<float>(config.loss);
  data::DistributedSampler sampler(train.samples, 0, 1, true, false, config.seed);
  record::PhaseClock phases;
  std::vector<double> losses[2];
  for (bool prefetch : {false, true}) {
    BatchPipeline<float> pipeline(model, *loss, train, batch, 0, phases, config.train_data.augment, prefetch);
    pipeline.training_pass().seed = config.seed;
    const Index steps = sampler.steps_per_epoch(batch), per_rank = sampler.per_rank();
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      sampler.set_epoch(epoch);
      const Index* indices = sampler.indices().data();
      for (Index k = 0; k < steps; ++k) {
        const Index first = k * batch, count = std::min(batch, per_rank - first);
        if (k + 1 < steps) pipeline.prefetch(indices + first + batch, std::min(batch, per_rank - first - batch), epoch);
        nn::PassContext pass = pipeline.training_pass();
        pass.epoch = epoch;
        for (Index part = 0; part < 2; ++part) {
          losses[prefetch].push_back(pipeline.forward_loss(indices + first + part * count / 2, count / 2, pass));
          pipeline.backward(pass);
        }
      }
    }
    EXPECT_EQ(pipeline.prefetched_batches(), prefetch ? 2 * (steps - 1) : 0);
  }
  EXPECT_EQ(losses[true], losses[false]);
}

}  // namespace
}  // namespace mpiddp::train
