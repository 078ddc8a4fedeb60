// The trainer's fault policies on one process: what each rank does with its own decision.
// The multi-rank behaviour (agreement, MPI_Abort, the watchdog) is in tests/cli/faults.sh.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {
namespace {

RunResult run_with(const std::vector<std::string>& assignments) {
  io::Json user = config::default_experiment();
  config::apply_override(user, "epochs=1");  // 256 samples / 64 = 4 steps
  for (const auto& a : assignments) config::apply_override(user, a);
  const config::Config config = config::parse_config(user);
  distributed::LocalCommunicator comm;
  return run_training(config, comm, {.quiet = true});
}

TEST(TrainerFaults, NonFiniteAbortsNamingStepAndRank) {
  try {
    run_with({"debug.fail_rank=0", "debug.fail_step=3", "debug.fail_kind=nan"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitNonFinite);
    EXPECT_TRUE(e.on_every_rank());  // every rank decides from the same reduced sum
    EXPECT_STREQ(e.what(), "non-finite loss or gradient at step 3 (epoch 1), first seen on "
                           "rank 0 (on_nonfinite = abort)");
  }
}

TEST(TrainerFaults, SkippedStepsMakeNoUpdate) {
  // Every step skipped leaves the initial parameters, exactly as a learning rate of 0 does.
  const RunResult skipped = run_with({"on_nonfinite=skip", "debug.fail_rank=0",
                                      "debug.fail_step=1", "debug.fail_count=4",
                                      "debug.fail_kind=nan"});
  const RunResult frozen = run_with({"optimizer.lr=0"});
  EXPECT_EQ(skipped.skipped_steps, 4);
  EXPECT_EQ(skipped.replicas.checksum, frozen.replicas.checksum);
  ASSERT_EQ(skipped.step_losses.size(), 4u);
  // The poisoned gradient is not the loss: the loss slot stays finite, the step is skipped.
  EXPECT_TRUE(std::isfinite(skipped.step_losses[0]));
  // One skipped step: the others still train, so the result differs from the clean run.
  const RunResult one = run_with({"on_nonfinite=skip", "debug.fail_rank=0", "debug.fail_step=2",
                                  "debug.fail_kind=nan"});
  const RunResult clean = run_with({});
  EXPECT_EQ(one.skipped_steps, 1);
  EXPECT_NE(one.replicas.checksum, clean.replicas.checksum);
  EXPECT_EQ(one.step_losses[0], clean.step_losses[0]);
  EXPECT_EQ(clean.skipped_steps, 0);
}

TEST(TrainerFaults, TooManySkipsInARowAbort) {
  try {
    run_with({"on_nonfinite=skip", "max_skipped=1", "debug.fail_rank=0", "debug.fail_step=2",
              "debug.fail_count=2", "debug.fail_kind=nan"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitNonFinite);
    EXPECT_TRUE(e.on_every_rank());  // every rank decides from the same reduced sum
    EXPECT_NE(std::string(e.what()).find("at step 3 (epoch 1), first seen on rank 0; 2 non-finite "
                                         "steps in a row, more than max_skipped = 1"),
              std::string::npos)
        << e.what();
  }
}

TEST(TrainerFaults, InjectedThrowIsAnErrorAtThatStep) {
  try {
    run_with({"debug.fail_rank=0", "debug.fail_step=2", "debug.fail_kind=throw"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_FALSE(e.on_every_rank());  // one rank's failure: the job must be aborted
    EXPECT_EQ(e.code(), kExitFailure);
    EXPECT_STREQ(e.what(), "injected failure (debug.fail_kind = throw) at step 2");
  }
}

}  // namespace
}  // namespace mpiddp::train
