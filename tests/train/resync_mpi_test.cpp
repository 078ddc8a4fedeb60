// divergence.action=resync when the end-of-run check finds the divergence: the re-check after
// the repair reads rank 0's parameters in pieces of at most 2^20 values, like the first check.
// A model above 2^20 parameters once overran that scratch (a segmentation fault at exit);
// here, in the mpi label, the sanitizer build of scripts/test-sanitize.sh runs this path too.
// Models below and above the piece size, at each launched world size.
#include <gtest/gtest.h>

#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {
namespace {

// The default experiment for 1 epoch of 2 steps, rank 1's parameters perturbed by one ulp
// after the update of step 2, the last: only the end-of-run check can see it.
config::Config perturbed_run(Index hidden) {
  io::Json user = config::default_experiment();
  for (const char* assignment :
       {"epochs=1", "data.train.samples=96", "batch.global=48", "divergence.action=resync",
        "debug.fail_rank=1", "debug.fail_step=2", "debug.fail_kind=perturb"})
    config::apply_override(user, assignment);
  config::apply_override(user, "model.layers.0.out=" + std::to_string(hidden));
  config::apply_override(user, "model.layers.2.out=" + std::to_string(hidden));
  return config::parse_config(user);
}

class ResyncAtTheEnd : public ::testing::TestWithParam<Index> {};

TEST_P(ResyncAtTheEnd, RepairsAndRechecksInPieces) {
  distributed::MpiCommunicator comm;
  ASSERT_GE(comm.size(), 2) << "needs a rank 1 to perturb";
  const RunResult result = run_training(perturbed_run(GetParam()), comm, {.quiet = true});
  EXPECT_EQ(result.steps, 2);
  EXPECT_EQ(result.resyncs, 1);
  EXPECT_TRUE(result.replicas.identical);
  EXPECT_EQ(result.replicas.max_diff, 0.0);
}

// 48 hidden: 2,737 parameters, one piece. 1100: 1,219,901 parameters, two pieces.
INSTANTIATE_TEST_SUITE_P(ModelSizes, ResyncAtTheEnd, ::testing::Values(Index{48}, Index{1100}),
                         [](const auto& info) { return "hidden" + std::to_string(info.param); });

}  // namespace
}  // namespace mpiddp::train
