// reduce.shard_optimizer (ZeRO-1) at the launcher's world size N: the sharded run repeats the
// unsharded one bit for bit (every step's loss, the final parameters) on each reduction path,
// with SGD + momentum, Adam and AdamW (float64), and with bf16 between nodes; its checkpoints are the unsharded run's byte for byte;
// each rank holds the optimizer state of its part only; a replica repaired by a resync is
// the unperturbed run's. Run at N = 2 and 3 (one node, shared memory), at N = 4 as two
// emulated nodes of 2 (MPIDDP_TEST_RANKS_PER_NODE=2), where on the shm path the optimizer is
// sharded across the world (each node rank's run of the buffer reduce-scattered and
// allgathered between the nodes), and at N = 2 as two nodes of one rank, where it is sharded
// across the leaders (at two nodes a + b = b + a, so the bits are still the unsharded run's).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/scratch_dir.hpp"

namespace mpiddp::train {
namespace {

// 4 steps per epoch at N = 1, 2, 3, 4; 2,737 parameters, so every rank's part is non-empty.
io::Json experiment(const std::string& optimizer, const std::string& algorithm, bool shard) {
  io::Json user = config::default_experiment();
  for (const std::string& assignment : std::vector<std::string>{
           "data.train.samples=192", "batch.global=48", "epochs=2", "optimizer=" + optimizer,
        "reduce.algorithm=" + algorithm, "reduce.first_bucket_mb=0.001",
        "reduce.bucket_cap_mb=0.004", std::string("reduce.shard_optimizer=") + (shard ? "true" : "false")})
    config::apply_override(user, assignment);
  return user;
}

// One rank per node and several nodes: the parts are the world's.
bool across_leaders(const distributed::Communicator& comm) {
  return comm.ranks_on_node() == 1 && comm.size() > 1;
}

RunResult train(distributed::Communicator& comm, const io::Json& user) {
  return run_training(config::parse_config(user), comm, {.quiet = true});
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Case {
  std::string name, optimizer, algorithm, dtype;
  std::string extra = "reduce.compress=\"none\"";  // one more override
};

class ShardedRun : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedRun, IsBitwiseTheUnshardedRun) {
  distributed::MpiCommunicator comm;
  const Case& c = GetParam();
  io::Json whole = experiment(c.optimizer, c.algorithm, false);
  config::apply_override(whole, "dtype=" + c.dtype);
  config::apply_override(whole, c.extra);
  io::Json sharded = whole;
  config::apply_override(sharded, "reduce.shard_optimizer=true");
  if (across_leaders(comm) && c.extra.find("bf16") != std::string::npos) {
    try {
      Trainer<float> trainer(config::parse_config(sharded), comm);
      FAIL() << "bf16 with the optimizer sharded across the leaders was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key_path(), "reduce.compress") << e.what();
    }
    return;
  }
  if (c.dtype == "float32") {
    // Among whom the state is cut: the world wherever the nodes can reduce-scatter (one
    // rank per node, or nodes of several ranks on the shm path, uncompressed).
    const bool bf16 = c.extra.find("bf16") != std::string::npos;
    const bool several_nodes = comm.ranks_on_node() < comm.size();
    const bool world = across_leaders(comm) || (several_nodes && c.algorithm == "shm" && !bf16);
    Trainer<float> probe(config::parse_config(sharded), comm);
    EXPECT_EQ(probe.optimizer().scope() == distributed::ShardScope::kWorld, world);
    EXPECT_EQ(probe.optimizer().parts(), world ? comm.size() : comm.ranks_on_node());
  }
  const RunResult a = train(comm, whole), b = train(comm, sharded);
  ASSERT_EQ(a.step_losses.size(), 8u);
  EXPECT_EQ(b.step_losses, a.step_losses);  // exact: doubles compared bit for bit
  EXPECT_EQ(b.replicas.checksum, a.replicas.checksum);
  EXPECT_TRUE(b.replicas.identical);
  EXPECT_EQ(b.epochs.back().eval_loss, a.epochs.back().eval_loss);
  EXPECT_LT(a.step_losses.back(), a.step_losses.front());  // it trains: the updates are real
  if (comm.rank() == 0)
    std::printf("[shard] N=%d %s: param_checksum %s in both runs\n", comm.size(), c.name.c_str(),
                b.replicas.checksum.c_str());
}

const char* const kMomentum = R"({"type":"sgd","lr":0.03,"momentum":0.9})";
const char* const kAdam = R"({"type":"adam","lr":0.01})";
const char* const kAdamW = R"({"type":"adamw","lr":0.01,"weight_decay":0.1})";

INSTANTIATE_TEST_SUITE_P(
    Optimizers, ShardedRun,
    ::testing::Values(Case{"momentum_shm", kMomentum, "shm", "float32"},
                      Case{"adam_shm", kAdam, "shm", "float32"},
                      Case{"momentum_mpi", kMomentum, "mpi", "float32"},
                      Case{"adam_mpi", kAdam, "mpi", "float32"},
                      Case{"adamw_shm_float64", kAdamW, "shm", "float64"},
                      // bf16 between nodes (two emulated nodes at N = 4; a note elsewhere)
                      Case{"adam_shm_bf16", kAdam, "shm", "float32", "reduce.compress=\"bf16\""}),
    [](const auto& info) { return info.param.name; });

TEST(ShardedCheckpoint, IsTheUnshardedCheckpointByteForByte) {
  distributed::MpiCommunicator comm;
  const std::string dir = test::shared_scratch_dir(comm, "shard_checkpoint");
  for (const bool shard : {false, true}) {
    io::Json user = experiment(kAdam, "shm", shard);
    config::apply_override(user, "checkpoint.dir=\"" + dir + (shard ? "/sharded" : "/whole") + "\"");
    config::apply_override(user, "checkpoint.every_steps=3");
    config::apply_override(user, "checkpoint.keep=0");
    train(comm, user);
  }
  if (comm.rank() != 0) return;
  for (const int64_t step : {3, 6, 8}) {  // every 3 steps, and the end
    const std::string whole = file_bytes(checkpoint::checkpoint_path(dir + "/whole", step));
    const std::string sharded = file_bytes(checkpoint::checkpoint_path(dir + "/sharded", step));
    ASSERT_GT(whole.size(), 3u * 2737 * sizeof(float)) << "step " << step;  // params, m, v
    EXPECT_TRUE(whole == sharded) << "the checkpoints of step " << step << " differ";
  }
}

TEST(ShardedCheckpoint, ResumesUnshardedAndShardedAsTheStraightRun) {
  distributed::MpiCommunicator comm;
  const std::string dir = test::shared_scratch_dir(comm, "shard_resume");
  io::Json user = experiment(kAdam, "shm", true);
  config::apply_override(user, "checkpoint.dir=\"" + dir + "\"");
  config::apply_override(user, "checkpoint.every_steps=3");
  config::apply_override(user, "checkpoint.keep=0");
  const RunResult straight = train(comm, user);
  for (const bool shard : {false, true}) {
    io::Json resumed_user = user;
    config::apply_override(resumed_user, std::string("reduce.shard_optimizer=") + (shard ? "true" : "false"));
    config::apply_override(resumed_user, "checkpoint.dir=\"" + dir + "/resumed" + (shard ? "1" : "0") + "\"");
    TrainOptions options{.quiet = true};
    options.resume = checkpoint::checkpoint_path(dir, 3);  // mid-epoch: batch 3 of epoch 1
    const RunResult resumed = run_training(config::parse_config(resumed_user), comm, options);
    ASSERT_EQ(resumed.step_losses.size(), 5u);
    EXPECT_EQ(resumed.step_losses,
              std::vector<double>(straight.step_losses.begin() + 3, straight.step_losses.end()))
        << "resumed with shard_optimizer " << shard;
    EXPECT_EQ(resumed.replicas.checksum, straight.replicas.checksum);
  }
}

TEST(OptimizerState, EachRankHoldsItsPartOnly) {
  distributed::MpiCommunicator comm;
  optim::OptimizerConfig adam;
  adam.type = "adam";
  const Index p = 100003;  // not a multiple of the parts or of a cache line
  for (const distributed::ShardScope scope : {distributed::ShardScope::kNode, distributed::ShardScope::kWorld}) {
    optim::Optimizer<float> shard(adam, p, distributed::part_exchange(comm, scope));
    const auto buffers = shard.local().state_buffers();
    ASSERT_EQ(buffers.size(), 2u);
    const Index held = shard.end() - shard.begin();
    for (const auto& buffer : buffers) EXPECT_EQ(static_cast<Index>(buffer.values->size()), held);
    // ceil(P / n) rounded up to 16 floats, and the node's parts (across the world: the
    // world's) add up to P exactly.
    const bool world = scope == distributed::ShardScope::kWorld;
    EXPECT_EQ(shard.scope(), scope);
    const int n = world ? comm.size() : comm.ranks_on_node();
    EXPECT_EQ(shard.parts(), n);
    EXPECT_LE(held, (p + n - 1) / n + 15);
    double sum = static_cast<double>(held);
    comm.allreduce_sum(&sum, 1);
    EXPECT_EQ(sum, static_cast<double>(p) * (comm.size() / n));
    const int mine = world ? comm.world_part() : comm.node_rank();
    EXPECT_EQ(shard.begin(), optim::part_begin(p, n, mine, sizeof(float)));
    EXPECT_EQ(shard.holds_last_part(), mine == n - 1);
  }
  // Across the world every rank owns another part, and node rank s's parts on the nodes lie
  // side by side: part s * nodes + n.
  const auto parts = comm.allgather(static_cast<uint64_t>(comm.world_part()));
  std::vector<uint64_t> sorted(parts);
  std::sort(sorted.begin(), sorted.end());
  for (size_t r = 0; r < sorted.size(); ++r) EXPECT_EQ(sorted[r], r);
  const int nodes = comm.size() / comm.ranks_on_node();
  EXPECT_EQ(comm.world_part() / nodes, comm.node_rank());
}

TEST(OptimizerState, ShardsAcrossTheWorldWhereTheNodesCanScatter) {
  distributed::MpiCommunicator comm;
  const bool leaders = across_leaders(comm);
  const bool several_nodes = comm.ranks_on_node() < comm.size();
  EXPECT_EQ(distributed::shard_scope(comm, false, true, false), distributed::ShardScope::kNone);
  // The shm path, uncompressed: among the world wherever there are several nodes.
  EXPECT_EQ(distributed::shard_scope(comm, true, !leaders, false), several_nodes ? distributed::ShardScope::kWorld : distributed::ShardScope::kNode);
  // Nodes of several ranks that share no memory (the mpi path), or bf16 between them: the node's.
  if (!leaders) {
    EXPECT_EQ(distributed::shard_scope(comm, true, false, false), distributed::ShardScope::kNode);
    EXPECT_EQ(distributed::shard_scope(comm, true, true, true), distributed::ShardScope::kNode);
  }
}

TEST(ShardedResync, RepairsAPerturbedReplicaIntoTheUnperturbedRun) {
  distributed::MpiCommunicator comm;
  ASSERT_GE(comm.size(), 2) << "needs a rank 1 to perturb";
  // On the mpi path: on the shm path the node's ranks share one copy of the parameters, so
  // a replica cannot be perturbed alone (ShardedConfig.RefusesPerturbingTheNodeCopy).
  const io::Json clean = experiment(kAdam, "mpi", false);
  io::Json perturbed = experiment(kAdam, "mpi", true);
  for (const char* assignment : {"divergence.action=resync", "check_every_steps=1",
                                 "debug.fail_rank=1", "debug.fail_step=2", "debug.fail_kind=perturb"})
    config::apply_override(perturbed, assignment);
  const RunResult a = train(comm, clean), b = train(comm, perturbed);
  EXPECT_EQ(b.resyncs, 1);
  EXPECT_TRUE(b.replicas.identical);
  // The perturbation touched rank 1's copy after the step's update; the resync, right
  // after it, gave every rank rank 0's unperturbed parameters and state.
  EXPECT_EQ(b.step_losses, a.step_losses);
  EXPECT_EQ(b.replicas.checksum, a.replicas.checksum);
}

TEST(ShardedConfig, RefusesSyncOff) {
  distributed::MpiCommunicator comm;
  io::Json user = experiment(kAdam, "shm", true);
  config::apply_override(user, "sync=false");
  try {
    Trainer<float> trainer(config::parse_config(user), comm);
    FAIL() << "sync=false with reduce.shard_optimizer was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "reduce.shard_optimizer") << e.what();
    EXPECT_EQ(e.code(), kExitConfig);
  }
}

TEST(ShardedConfig, RefusesPerturbingTheNodeCopy) {
  distributed::MpiCommunicator comm;
  if (comm.ranks_on_node() < 2) GTEST_SKIP() << "one rank on the node: no node copy";
  io::Json user = experiment(kAdam, "shm", true);
  config::apply_override(user, "debug.fail_kind=perturb");
  config::apply_override(user, "debug.fail_rank=1");
  try {
    Trainer<float> trainer(config::parse_config(user), comm);
    FAIL() << "debug.fail_kind=perturb with the parameters once per node was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "debug.fail_kind") << e.what();
    EXPECT_EQ(e.code(), kExitConfig);
  }
}

}  // namespace
}  // namespace mpiddp::train
