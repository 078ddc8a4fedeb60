// The step strategies on one process, built from a config as the trainer builds them: which
// one a mode gets and what it declares, and the outcome of a step's reduction (the loss of
// the batch, the verdict on a non-finite gradient) for each.
#include "mpiddp/train/step_strategy.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>

#include "mpiddp/data/source.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/statistics_reducer.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {
namespace {

// The trainer's parts for a config, on a world of one.
struct OneProcess {
  explicit OneProcess(const config::Config& c)
      : config(c), train(data::load_source<double>(c.train_data, c.seed, "train")),
        model({train.features}, c.layers, c.per_rank_batch(1), kReservedSlots),
        loss(nn::build_loss<double>(c.loss)), reducer(comm, c.reduce),
        optimizer(c.optimizer, model.parameter_count(), distributed::part_exchange(comm, distributed::ShardScope::kNone)), statistics(comm),
        sampler(train.samples, 0, 1, c.shuffle, c.drop_last, c.seed),
        pipeline(model, *loss, train, c.per_rank_batch(1), train.outputs, phases) {
    plan_reduction(reducer, model);
    model.initialize(c.seed);
    sampler.set_epoch(0);
    step = make_step_strategy<double>({config, comm, pipeline, reducer, optimizer, statistics,
                                       c.per_rank_batch(1), sampler});
  }
  // compute_gradients and reduce on the epoch's first batch; `poison` puts a NaN in one
  // gradient between them, as faults.inject's nan_gradient does.
  StepOutcome step_once(bool poison = false) {
    const double local = step->compute_gradients(sampler.indices().data(), config.per_rank_batch(1));
    if (poison) model.gradients()[3] = std::numeric_limits<double>::quiet_NaN();
    return step->reduce(local);
  }

  config::Config config;
  distributed::LocalCommunicator comm;
  data::Dataset<double> train;
  nn::Model<double> model;
  std::unique_ptr<nn::Loss<double>> loss;
  distributed::GradientReducer<double> reducer;
  optim::Optimizer<double> optimizer;
  distributed::CommunicatorStatistics statistics;
  data::DistributedSampler sampler;
  record::PhaseClock phases;
  BatchPipeline<double> pipeline;
  std::unique_ptr<StepStrategy<double>> step;
};

config::Config experiment(const std::string& override_text = "") {
  io::Json user = config::default_experiment();
  config::apply_override(user, "dtype=float64");
  config::apply_override(user, "batch.global=48");
  config::apply_override(user, "data.train.samples=240");
  if (!override_text.empty()) config::apply_override(user, override_text);
  return config::parse_config(user);
}

TEST(StepStrategy, EachModeDeclaresWhatItNeeds) {
  OneProcess data_parallel(experiment());
  EXPECT_TRUE(data_parallel.step->keeps_replicas_identical());
  EXPECT_EQ(data_parallel.step->threads(3), 3);
  OneProcess local(experiment("sync=false"));
  EXPECT_FALSE(local.step->keeps_replicas_identical());  // sync off: the replicas drift
  OneProcess exact(experiment("deterministic=true"));
  EXPECT_EQ(exact.step->threads(3), 1);  // one thread fixes the order of the additions
  exact.step->start(1);
  io::Json record = io::Json::object();
  exact.step->describe(record);
  EXPECT_EQ(record["deterministic"]["chunks"], 24);
}

// On one process every strategy reports the batch's mean loss and applies a finite step;
// the three give that loss alike to float64 rounding (the deterministic one sums 24 chunk
// means exactly, the others take one mean of 48 samples).
TEST(StepStrategy, OutcomeOfAFiniteStep) {
  double losses[3];
  int i = 0;
  for (const char* mode : {"sync=true", "sync=false", "deterministic=true"}) {
    OneProcess p(experiment(mode));
    p.step->start(1);
    const StepOutcome outcome = p.step_once();
    EXPECT_TRUE(outcome.finite) << mode;
    EXPECT_TRUE(outcome.locally_finite) << mode;
    EXPECT_FALSE(outcome.stop_requested) << mode;
    EXPECT_GT(outcome.loss, 0.1) << mode;
    losses[i++] = outcome.loss;
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-15 * losses[0]);
  EXPECT_NEAR(losses[2], losses[0], 1e-13 * losses[0]);
}

// A NaN in this rank's gradients: the step may not apply, and the rank knows it saw it.
TEST(StepStrategy, NonFiniteGradientStopsTheStep) {
  for (const char* mode : {"reduce.overlap=false", "sync=false"}) {
    OneProcess p(experiment(mode));
    p.step->start(1);
    const StepOutcome outcome = p.step_once(/*poison=*/true);
    EXPECT_FALSE(outcome.finite) << mode;
    EXPECT_FALSE(outcome.locally_finite) << mode;
    EXPECT_TRUE(outcome.gradients_inspected) << mode;
  }
}

}  // namespace
}  // namespace mpiddp::train
