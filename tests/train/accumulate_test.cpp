// accumulate_steps K: K micro-batches of B/K give the update of one batch of B.
#include <gtest/gtest.h>

#include <cmath>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {
namespace {

config::Config experiment(const std::string& dtype, int64_t accumulate_steps) {
  io::Json user = config::default_experiment();
  config::apply_override(user, "dtype=" + dtype);
  config::apply_override(user, "accumulate_steps=" + std::to_string(accumulate_steps));
  return config::parse_config(user);
}

template <typename T>
double max_gradient_difference(int64_t k, Index count) {
  distributed::LocalCommunicator one;
  const config::Config whole_config = experiment(sizeof(T) == 4 ? "float32" : "float64", 1);
  const config::Config micro_config = experiment(sizeof(T) == 4 ? "float32" : "float64", k);
  Trainer<T> whole(whole_config, one), micro(micro_config, one);
  whole.model().initialize(0);
  micro.model().initialize(0);
  const auto order = data::epoch_order(whole.train_set().samples, true, 0, 0);
  const double loss_whole = whole.compute_gradients(order.data(), count);
  const double loss_micro = micro.compute_gradients(order.data(), count);
  EXPECT_NEAR(loss_micro, loss_whole, (sizeof(T) == 4 ? 1e-6 : 1e-13) * loss_whole);
  double diff = 0, largest = 0;
  for (Index i = 0; i < whole.model().parameter_count(); ++i) {
    diff = std::max(diff, std::fabs(double(whole.model().gradients()[i]) -
                                    double(micro.model().gradients()[i])));
    largest = std::max(largest, std::fabs(double(whole.model().gradients()[i])));
  }
  EXPECT_GT(largest, 1e-2);  // not trivially zero
  return diff;
}

TEST(Accumulate, MicroBatchGradientsAddUpToTheBatchGradient) {
  // 64 samples as 4 micro-batches of 16: equal up to float rounding.
  EXPECT_LE(max_gradient_difference<float>(4, 64), 1e-6);
  EXPECT_LE(max_gradient_difference<double>(4, 64), 1e-14);
}

TEST(Accumulate, UnequalMicroBatchesOfAShortLastBatch) {
  // A last batch of 7 samples with K = 4: micro-batches of 2, 2, 2 and 1, weighted by size.
  EXPECT_LE(max_gradient_difference<double>(4, 7), 1e-14);
  // Fewer samples than K: 3 micro-batches of one.
  EXPECT_LE(max_gradient_difference<double>(4, 3), 1e-14);
}

TEST(Accumulate, TrainingMatchesOneBatch) {
  distributed::LocalCommunicator one;
  const RunResult whole = run_training(experiment("float64", 1), one, {.quiet = true});
  const RunResult micro = run_training(experiment("float64", 8), one, {.quiet = true});
  ASSERT_EQ(whole.step_losses.size(), micro.step_losses.size());
  for (size_t s = 0; s < whole.step_losses.size(); ++s)
    EXPECT_NEAR(micro.step_losses[s], whole.step_losses[s], 1e-12 * whole.step_losses[s]) << s;
  EXPECT_NEAR(micro.epochs.back().eval_loss, whole.epochs.back().eval_loss,
              1e-12 * whole.epochs.back().eval_loss);
}

TEST(Accumulate, MustDivideThePerRankBatch) {
  distributed::LocalCommunicator one;
  try {
    Trainer<float> t(experiment("float32", 5), one);  // 64 % 5 != 0
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "accumulate_steps");
    EXPECT_NE(std::string(e.what()).find("per-rank batch 64"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpiddp::train
