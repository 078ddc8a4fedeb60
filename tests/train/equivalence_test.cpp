// The three experiments of data parallelism, in-process at the launcher's world size N:
// each rank also runs the single-process reference itself (LocalCommunicator), so every
// rank can compare the N-rank result with the 1-rank result directly. Every experiment runs
// on each gradient reduction path (reduce.algorithm, with and without overlap).
#include <gtest/gtest.h>

#include <cmath>

#include "mpiddp/data/sampler.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/reduction_path.hpp"

namespace mpiddp::train {
namespace {

using test::Path;
using test::path_name;

class Equivalence : public ::testing::TestWithParam<Path> {};

config::Config experiment(const std::string& dtype, const Path& path, bool sync = true) {
  io::Json user = config::default_experiment();
  config::apply_override(user, "dtype=" + dtype);
  if (!sync) config::apply_override(user, "sync=false");
  // Small buckets, so the default model's few kB of gradients go in several collectives.
  test::apply_path(user, path, 0.001, 0.004);
  return config::parse_config(user);
}

template <typename T>
void check_gradient_equivalence(const Path& path, double tolerance) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const config::Config config = experiment(sizeof(T) == 4 ? "float32" : "float64", path);
  Trainer<T> distributed(config, comm), single(config, one);
  distributed.model().initialize(config.seed);
  single.model().initialize(config.seed);

  // Global batch 0 of epoch 0: 64 samples on one rank, 64/N on each of N ranks.
  const auto order = data::epoch_order(distributed.train_set().samples, true, config.seed, 0);
  const Index b = config.per_rank_batch(comm.size());
  const auto mine = data::shard_order(order, comm.rank(), comm.size(), false);
  const double local_loss = distributed.compute_gradients(mine.data(), b);  // overlapped as the path says
  const double global_loss = distributed.synchronize(local_loss);
  const double full_loss = single.compute_gradients(order.data(), 64);

  const Index p = single.model().parameter_count();
  double max_diff = 0.0, max_grad = 0.0;
  for (Index i = 0; i < p; ++i) {
    max_diff = std::max(max_diff, std::fabs(double(distributed.model().gradients()[i]) -
                                            double(single.model().gradients()[i])));
    max_grad = std::max(max_grad, std::fabs(double(single.model().gradients()[i])));
  }
  EXPECT_LE(max_diff, tolerance) << "N=" << comm.size();
  EXPECT_GT(max_grad, 1e-2);  // the gradients compared are not trivially zero
  EXPECT_NEAR(global_loss, full_loss, tolerance * std::max(1.0, full_loss));
  if (comm.rank() == 0)
    std::printf("[gradient equivalence] N=%d %s %s: max |g_N - g_1| = %.3g (max |g| = %.3g)\n",
                comm.size(), path.algorithm.c_str(), sizeof(T) == 4 ? "float32" : "float64",
                max_diff, max_grad);
}

TEST_P(Equivalence, GradientsFloat32) { check_gradient_equivalence<float>(GetParam(), 1e-6); }
TEST_P(Equivalence, GradientsFloat64) { check_gradient_equivalence<double>(GetParam(), 1e-12); }

void check_training_equivalence(const Path& path, const std::string& dtype, double rtol) {
  distributed::MpiCommunicator comm;
  distributed::LocalCommunicator one;
  const config::Config config = experiment(dtype, path);
  const RunResult n_ranks = run_training(config, comm, {.quiet = true});
  const RunResult single = run_training(config, one, {.quiet = true});
  ASSERT_EQ(n_ranks.epochs.size(), single.epochs.size());
  for (size_t e = 0; e < single.epochs.size(); ++e) {
    const double a = n_ranks.epochs[e].eval_loss, b = single.epochs[e].eval_loss;
    EXPECT_NEAR(a, b, rtol * std::fabs(b)) << "epoch " << e + 1;
  }
  ASSERT_EQ(n_ranks.step_losses.size(), single.step_losses.size());
  for (size_t s = 0; s < single.step_losses.size(); ++s)
    EXPECT_NEAR(n_ranks.step_losses[s], single.step_losses[s], 10 * rtol * single.step_losses[s])
        << "step " << s + 1;
  EXPECT_TRUE(n_ranks.replicas.identical);
  EXPECT_EQ(n_ranks.replicas.max_diff, 0.0);
  if (comm.rank() == 0)
    std::printf("[training equivalence] N=%d %s: final eval_loss %.17g vs %.17g\n", comm.size(),
                dtype.c_str(), n_ranks.epochs.back().eval_loss, single.epochs.back().eval_loss);
}

TEST_P(Equivalence, TrainingFloat32) { check_training_equivalence(GetParam(), "float32", 1e-5); }
TEST_P(Equivalence, TrainingFloat64) { check_training_equivalence(GetParam(), "float64", 1e-12); }

INSTANTIATE_TEST_SUITE_P(ReductionPaths, Equivalence,
                         ::testing::Values(Path{"mpi", true, 1}, Path{"mpi", false, 1},
                                           Path{"shm", true, 1}, Path{"shm", false, 1},
                                           Path{"auto", true, 4}),
                         path_name);

// With two ranks every path adds the same two numbers per element (a + b = b + a exactly),
// so every path must give the same bits. This also catches a gradient buffer that moved
// to memory with another alignment: Eigen's reductions round an unaligned head otherwise.
TEST(EquivalenceAcrossPaths, TwoRanksGiveTheSameBitsOnEveryPath) {
  distributed::MpiCommunicator comm;
  if (comm.size() != 2) GTEST_SKIP() << "sum orders differ beyond two ranks";
  const RunResult mpi = run_training(experiment("float32", Path{"mpi", false, 1}), comm,
                                     {.quiet = true});
  const RunResult shm = run_training(experiment("float32", Path{"shm", true, 1}), comm,
                                     {.quiet = true});
  EXPECT_EQ(shm.step_losses, mpi.step_losses);
  EXPECT_EQ(shm.replicas.checksum, mpi.replicas.checksum);
  EXPECT_FALSE(mpi.step_losses.empty());
}

TEST(EquivalenceNoSync, WithoutSyncReplicasDrift) {
  distributed::MpiCommunicator comm;
  if (comm.size() == 1) GTEST_SKIP() << "one replica cannot drift";
  const RunResult r = run_training(experiment("float32", Path{"auto", true, 1}, false), comm,
                                   {.quiet = true});
  EXPECT_FALSE(r.replicas.identical);
  EXPECT_GT(r.replicas.max_diff, 1e-3);
  if (comm.rank() == 0)
    std::printf("[no sync] N=%d: max_replica_diff = %.6g\n", comm.size(), r.replicas.max_diff);
}

}  // namespace
}  // namespace mpiddp::train
