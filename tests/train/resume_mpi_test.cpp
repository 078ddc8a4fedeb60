// Checkpoint/resume and order replay at the launcher's world size N: a resumed run repeats
// the straight run bit for bit at the same N, a checkpoint written by one process resumes at
// N within float tolerance, and replaying the sampler's own order changes nothing.
#include <gtest/gtest.h>

#include <cmath>

#include "mpiddp/data/sampler.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/order_file.hpp"
#include "../support/scratch_dir.hpp"
#include "../support/resume_experiment.hpp"

namespace mpiddp::train {
namespace {

using test::adam_experiment;
using test::train_run;

TEST(ResumeMpi, MidEpochResumeIsBitwiseEqualAtTheSameWorldSize) {
  distributed::MpiCommunicator comm;
  const std::string dir = test::shared_scratch_dir(comm, "resume_mpi_mid");
  io::Json user = adam_experiment(dir);
  config::apply_override(user, "checkpoint.every_steps=3");
  const RunResult straight = train_run(comm, user);
  // Step 6 is batch 2 of epoch 2 (4 steps per epoch at any N here).
  const RunResult resumed = train_run(comm, user, checkpoint::checkpoint_path(dir, 6));
  ASSERT_EQ(resumed.step_losses.size(), 10u);
  EXPECT_EQ(resumed.step_losses,
            std::vector<double>(straight.step_losses.begin() + 6, straight.step_losses.end()));
  EXPECT_EQ(resumed.epochs.back().eval_loss, straight.epochs.back().eval_loss);
  EXPECT_EQ(resumed.replicas.checksum, straight.replicas.checksum);
  EXPECT_TRUE(resumed.replicas.identical);
}

TEST(ResumeMpi, OneProcessCheckpointResumesWithinFloatTolerance) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const std::string dir = test::shared_scratch_dir(comm, "resume_mpi_cross");
  io::Json user = adam_experiment(dir);
  config::apply_override(user, "dtype=float64");
  // The one-process reference runs on every rank: each in its own directory.
  io::Json reference = user;
  config::apply_override(reference, "checkpoint.dir=\"" + dir + "/single" + std::to_string(comm.rank()) + "\"");
  const RunResult single = train_run(one, reference);
  comm.barrier();
  io::Json first_half = user;
  config::apply_override(first_half, "epochs=2");
  config::apply_override(first_half, "checkpoint.dir=\"" + dir + "/half\"");
  if (comm.rank() == 0) train_run(one, first_half);  // step 8, written by one process
  comm.barrier();
  const RunResult resumed = train_run(comm, user, dir + "/half/step-000000000008.safetensors");
  ASSERT_EQ(resumed.epochs.size(), 2u);
  for (size_t e = 0; e < 2; ++e)
    EXPECT_NEAR(resumed.epochs[e].eval_loss, single.epochs[e + 2].eval_loss,
                1e-12 * single.epochs[e + 2].eval_loss)
        << "epoch " << e + 3 << " at N=" << comm.size();
}

TEST(ResumeMpi, ReplayingTheSamplersOwnOrderChangesNothing) {
  distributed::MpiCommunicator comm;
  const std::string dir = test::shared_scratch_dir(comm, "order_mpi");
  if (comm.rank() == 0) {
    std::vector<int64_t> rows;
    for (int64_t e = 0; e < 4; ++e) {
      const auto order = data::epoch_order(256, true, 0, e);
      rows.insert(rows.end(), order.begin(), order.end());
    }
    test::write_order(dir + "/order.npy", {4, 256}, rows);
  }
  comm.barrier();
  io::Json replay = config::default_experiment();
  config::apply_override(replay, "sampler.order=\"" + dir + "/order.npy\"");
  const RunResult replayed = train_run(comm, replay);
  const RunResult own = train_run(comm, config::default_experiment());
  EXPECT_EQ(replayed.step_losses, own.step_losses);
  EXPECT_EQ(replayed.replicas.checksum, own.replicas.checksum);
}

}  // namespace
}  // namespace mpiddp::train
