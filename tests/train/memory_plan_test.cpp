// What a rank holds by kind (train/memory_plan.hpp): the need by hand, memory.limit_mb's
// refusal, and the trainer's need against the model it builds.
#include "mpiddp/train/memory_plan.hpp"

#include <gtest/gtest.h>

#include <string>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/token_windows.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {
namespace {

MemoryFacts thousand_parameters() {
  MemoryFacts facts;
  facts.parameters = 1000;
  facts.gradient_values = 1002;  // and the loss and stop slots
  facts.activation_bytes = 4096;
  facts.batch_bytes = 256;
  facts.data_bytes = 10000;
  facts.value_bytes = 4;
  return facts;
}

TEST(MemoryPlan, NeedByKindByHand) {
  optim::OptimizerConfig adamw;
  adamw.type = "adamw";
  // AdamW's two moments cut in two parts: 2 · 1000 · 4 / 2 = 4000 bytes; a second batch
  // with prefetch: 4096 + 2 · 256.
  MemoryNeed need = memory_need(adamw, /*prefetch=*/true, thousand_parameters(), {2, false, 0.0});
  EXPECT_EQ(need.parameters, 4000.0);
  EXPECT_EQ(need.gradients, 4008.0);
  EXPECT_EQ(need.optimizer_state, 4000.0);
  EXPECT_EQ(need.activations, 4608.0);
  EXPECT_EQ(need.data, 10000.0);
  EXPECT_EQ(need.step, 0.0);
  EXPECT_EQ(need.total(), 26616.0);
  // The whole state gathered for a checkpoint, beside the part: 4000 + 8000; one batch
  // without prefetch.
  need = memory_need(adamw, /*prefetch=*/false, thousand_parameters(), {2, true, 0.0});
  EXPECT_EQ(need.optimizer_state, 12000.0);
  EXPECT_EQ(need.activations, 4352.0);
  // The reducer's buffers, 4 bytes per gradient value (bf16 between nodes): 1002 · (4 + 4).
  EXPECT_EQ(memory_need(adamw, true, thousand_parameters(), {1, false, 4.0}).gradients, 8016.0);
  // ZeRO-2: the largest part (1000 cut in 2 runs of whole 64-byte lines: 512 values) and the
  // staging (300 values, then the loss and stop slots: 302) in place of the 1002: (512 + 302)
  // · 4; the scattered sums' buffers count the staging's values, 2 bytes each here: + 604.
  MemoryFacts staged = thousand_parameters();
  staged.staging_values = 300;
  EXPECT_EQ(memory_need(adamw, true, staged, {2, false, 0.0, true}).gradients, 3256.0);
  EXPECT_EQ(memory_need(adamw, true, staged, {2, false, 2.0, true}).gradients, 3860.0);
  EXPECT_EQ(memory_need(adamw, true, staged, {2, false, 0.0, true}).parameters, 4000.0);
  // ZeRO-3: the parameters likewise, their part and the staging without slots: (512 + 300) · 4.
  EXPECT_EQ(memory_need(adamw, true, staged, {2, false, 0.0, true, true}).parameters, 3248.0);
  EXPECT_EQ(memory_need(adamw, true, staged, {2, false, 0.0, true, true}).gradients, 3256.0);
  // Deterministic mode's step with the gradient in parts: the part alone, 512 · 4, no staging.
  EXPECT_EQ(memory_need(adamw, true, staged, {2, false, 0.0, true, false, true}).gradients, 2048.0);
  // bf16's copies of the weights with the parameters.
  MemoryFacts copies = thousand_parameters();
  copies.weight_copy_bytes = 2000;
  EXPECT_EQ(memory_need(adamw, true, copies, {}).parameters, 6000.0);
  // Plain sgd keeps nothing; momentum one buffer; ema its average and the live parameters
  // kept while the average is evaluated: 3 · 1000 · 4.
  optim::OptimizerConfig sgd;
  EXPECT_EQ(memory_need(sgd, true, thousand_parameters(), {}).optimizer_state, 0.0);
  sgd.momentum = 0.9;
  EXPECT_EQ(memory_need(sgd, true, thousand_parameters(), {}).optimizer_state, 4000.0);
  sgd.ema_decay = 0.999;
  EXPECT_EQ(memory_need(sgd, true, thousand_parameters(), {}).optimizer_state, 12000.0);
}

TEST(MemoryPlan, RecordInMebibytes) {
  MemoryNeed need;
  need.parameters = 3 * 1048576.0;
  need.gradients = 1048576.0;
  need.data = 524288.0;
  const io::Json record = memory_record(need, 0.0);
  EXPECT_EQ(record["needed_mb"], 4.5);
  EXPECT_EQ(record["by_kind"]["parameters"], 3.0);
  EXPECT_EQ(record["by_kind"]["gradients"], 1.0);
  EXPECT_EQ(record["by_kind"]["optimizer_state"], 0.0);
  EXPECT_EQ(record["by_kind"]["data"], 0.5);
  EXPECT_EQ(record["by_kind"]["step"], 0.0);
  EXPECT_FALSE(record.contains("limit_mb"));
  EXPECT_EQ(memory_record(need, 64.0)["limit_mb"], 64.0);
}

// Exit 2 naming the key, the limit and the need by kind; the hint to shard where it helps.
TEST(MemoryPlan, LimitBelowTheNeedIsExit2) {
  MemoryNeed need;
  need.parameters = 40 * 1048576.0;
  need.optimizer_state = 80 * 1048576.0;
  EXPECT_NO_THROW(check_memory_limit(0.0, need, true));    // no limit
  EXPECT_NO_THROW(check_memory_limit(120.0, need, true));  // exactly the need
  try {
    check_memory_limit(100.0, need, true);
    FAIL() << "120 MiB needed under a limit of 100";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), kExitConfig);
    EXPECT_EQ(e.key_path(), "memory.limit_mb");
    const std::string text = e.what();
    EXPECT_NE(text.find("is 100.0 MiB per rank, but this run needs 120.0 MiB per rank (parameters 40.0"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("optimizer state 80.0"), std::string::npos) << text;
    EXPECT_NE(text.find("reduce.shard \"optimizer\""), std::string::npos) << text;
  }
  try {
    check_memory_limit(100.0, need, false);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).find("reduce.shard"), std::string::npos) << e.what();
  }
}

// The default experiment: 6-linear48-tanh-linear48-tanh-linear1, P = 6·48 + 48 + 48·48 + 48 +
// 48 + 1 = 2737, 256 synthetic samples of 6 features and 1 target, 64 per step on one rank.
TEST(MemoryPlan, TrainerNeedIsTheModelItBuilds) {
  distributed::LocalCommunicator comm;
  io::Json user = config::default_experiment();
  config::apply_override(user, "optimizer={\"type\":\"adam\",\"lr\":0.01}");
  config::apply_override(user, "ema.decay=0.99");
  const config::Config config = config::parse_config(user);
  Trainer<float> trainer(config, comm, {.quiet = true});
  const MemoryNeed& need = trainer.memory_need();
  EXPECT_EQ(trainer.model().parameter_count(), 2737);
  EXPECT_EQ(need.parameters, 2737.0 * 4);
  EXPECT_EQ(need.gradients, 2739.0 * 4);          // the loss and stop slots
  EXPECT_EQ(need.optimizer_state, 4 * 2737.0 * 4);  // two moments, the average, the live copy
  EXPECT_EQ(need.data, 256.0 * (6 + 1) * 4);
  // The layers' memory as the model allocated it, and two gathered batches (prefetch) of 64
  // samples, each 6 inputs, 1 target, 1 label row and its index: 2 · 64 · (24 + 4 + 4 + 8).
  EXPECT_EQ(need.activations, static_cast<double>(trainer.model().activation_bytes()) + 5120.0);
}

// Deterministic mode's own: 8 chunks on one rank, each term P + 1 + 0 + 1 = 2739 floats padded
// to whole 64-byte lines (10,956 -> 11,008 bytes: 2752 floats); 8 terms, their mean and exact
// sum (8 bytes a value each) and the chunked pass's grid (P int64):
// 8 · 2752 · 4 + 2 · 2752 · 8 + 2737 · 8 = 88,064 + 44,032 + 21,896 = 153,992.
TEST(MemoryPlan, DeterministicStepCountsItsSums) {
  distributed::LocalCommunicator comm;
  io::Json user = config::default_experiment();
  config::apply_override(user, "deterministic={\"chunks\":8}");
  Trainer<float> deterministic(config::parse_config(user), comm, {.quiet = true});
  EXPECT_EQ(deterministic.memory_need().step, 153992.0);
  Trainer<float> plain(config::parse_config(config::default_experiment()), comm, {.quiet = true});
  EXPECT_EQ(plain.memory_need().step, 0.0);
  EXPECT_EQ(memory_record(deterministic.memory_need(), 0.0)["by_kind"]["step"], 153992.0 / 1048576.0);
}

// A model of 16,814,081 parameters (6-linear4096-tanh-linear4096-tanh-linear1): 64 MiB of
// parameters and 64 of gradients, refused under a limit of 100 before it is built.
TEST(MemoryPlan, TrainerRefusesARunOverTheLimit) {
  distributed::LocalCommunicator comm;
  io::Json user = config::default_experiment();
  config::apply_override(user, "model.layers.0.out=4096");
  config::apply_override(user, "model.layers.2.out=4096");
  config::apply_override(user, "memory.limit_mb=100");
  const config::Config config = config::parse_config(user);
  try {
    Trainer<float> trainer(config, comm, {.quiet = true});
    FAIL() << "128 MiB needed under a limit of 100";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "memory.limit_mb");
    EXPECT_NE(std::string(e.what()).find("(parameters 64.1, gradients 64.1, optimizer state 0.0"), std::string::npos)
        << e.what();
  }
}

// Windows over one array hold the whole file's ids once, their labels included, whatever
// part of it the range makes windows of; other sets their arrays.
TEST(MemoryPlan, DatasetBytes) {
  const auto tokens = std::make_shared<const std::vector<int32_t>>(1000, 7);
  data::WindowConfig windows;
  windows.block = 8;
  windows.stride = 4;
  windows.range_end = 0.5;  // windows of the first 500 ids only
  const data::Dataset<float> text = data::token_windows<float>(tokens, 10, windows, "ids");
  EXPECT_EQ(text.samples, 123);  // (500 - 9) / 4 + 1, in whole windows
  EXPECT_EQ(text.bytes(), 1000u * 4);
  static const int32_t ids[1] = {0};
  static const float values[1] = {0.0f};
  data::Dataset<float> images;
  images.samples = 100;
  images.features = 784;
  images.classes = 10;
  images.x = values;
  images.labels = ids;
  EXPECT_EQ(images.bytes(), 100u * 784 * 4 + 100u * 4);
}

}  // namespace
}  // namespace mpiddp::train
