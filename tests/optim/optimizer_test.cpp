// The optimizer shard without a launcher: the parts cover the buffer exactly, on cache-line
// boundaries, and an update applied part by part, each part with its own state, gives the
// bits of the whole-buffer update (Note [the optimizer sharded across a node]).
#include "mpiddp/optim/optimizer.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "mpiddp/distributed/local_communicator.hpp"

namespace mpiddp::optim {
namespace {

TEST(PartBegin, CoversTheBufferOnceInWholeCacheLines) {
  // 100 floats in 3 parts: ceil(100 / 3) = 34, rounded up to 16 floats = 48: [0, 48),
  // [48, 96), [96, 100).
  EXPECT_EQ(part_begin(100, 3, 0, 4), 0);
  EXPECT_EQ(part_begin(100, 3, 1, 4), 48);
  EXPECT_EQ(part_begin(100, 3, 2, 4), 96);
  EXPECT_EQ(part_begin(100, 3, 3, 4), 100);
  // Doubles: 8 a line. 10 in 4 parts: ceil(10/4) = 3 -> 8: [0, 8), [8, 10), then empty.
  EXPECT_EQ(part_begin(10, 4, 1, 8), 8);
  EXPECT_EQ(part_begin(10, 4, 2, 8), 10);
  EXPECT_EQ(part_begin(10, 4, 4, 8), 10);
  EXPECT_EQ(part_begin(7, 1, 1, 4), 7);
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Five steps of the whole buffer against five steps of n parts, each with its own optimizer
// over its part: parameters and every state buffer must agree bit for bit.
template <typename T>
void check_parts_match_whole(const optim::OptimizerConfig& config, int parts) {
  const Index p = 1001;  // odd, so parts end mid-vector and the loops' tails run
  std::vector<T> whole_params(p), params(p), grads(p);
  for (Index i = 0; i < p; ++i) {
    whole_params[i] = params[i] = static_cast<T>(std::sin(0.37 * static_cast<double>(i)));
  }
  auto whole = optim::make_update_rule<T>(config, p);
  std::vector<std::unique_ptr<optim::UpdateRule<T>>> shards;
  for (int s = 0; s < parts; ++s)
    shards.push_back(optim::make_update_rule<T>(
        config, part_begin(p, parts, s + 1, sizeof(T)) - part_begin(p, parts, s, sizeof(T))));
  for (int step = 1; step <= 5; ++step) {
    for (Index i = 0; i < p; ++i)
      grads[i] = static_cast<T>(std::cos(0.11 * static_cast<double>(i * step)) * 0.5);
    const double lr = config.lr / step;  // a schedule: the rate changes every step
    whole->step(whole_params.data(), grads.data(), lr);
    for (int s = 0; s < parts; ++s) {
      const Index b = part_begin(p, parts, s, sizeof(T));
      shards[s]->step(params.data() + b, grads.data() + b, lr);
    }
  }
  EXPECT_TRUE(same_bits(params, whole_params)) << config.type << " in " << parts << " parts";
  EXPECT_NE(params[1], static_cast<T>(std::sin(0.37)));  // the updates are real
  const auto whole_state = whole->state_buffers();
  for (size_t b = 0; b < whole_state.size(); ++b) {
    std::vector<T> joined;
    for (auto& shard : shards) {
      const auto& part = *shard->state_buffers()[b].values;
      joined.insert(joined.end(), part.begin(), part.end());
    }
    EXPECT_TRUE(same_bits(joined, *whole_state[b].values)) << whole_state[b].name;
  }
}

optim::OptimizerConfig optimizer(const std::string& type, double momentum = 0.0,
                                 double weight_decay = 0.0, bool nesterov = false, double ema_decay = 0.0) {
  optim::OptimizerConfig c;
  c.type = type;
  c.lr = type == "sgd" ? 0.05 : 0.01;
  c.momentum = momentum;
  c.weight_decay = weight_decay;
  c.nesterov = nesterov;
  c.ema_decay = ema_decay;
  c.ema_every_steps = 2;
  return c;
}

TEST(PartWiseStep, IsTheWholeStepBitForBit) {
  for (const int parts : {2, 3, 7}) {
    for (const auto& config :
         {optimizer("sgd"), optimizer("sgd", 0.9), optimizer("sgd", 0.9, 1e-2, true),
          optimizer("sgd", 0.0, 1e-2), optimizer("adam"), optimizer("adam", 0.0, 1e-2),
          optimizer("adamw", 0.0, 0.1), optimizer("adamw", 0.0, 0.1, false, 0.9)}) {
      check_parts_match_whole<float>(config, parts);
      check_parts_match_whole<double>(config, parts);
    }
  }
}

// Part `part` of a node of `parts` ranks that share one parameter buffer (each updates its
// own part of it): nothing to exchange.
class OnePartOfANode final : public distributed::PartExchange {
 public:
  OnePartOfANode(int parts, int part) : parts_(parts), part_(part) {}
  distributed::ShardScope scope() const override { return distributed::ShardScope::kNode; }
  int parts() const override { return parts_; }
  int part() const override { return part_; }
  bool is_rank0() const override { return part_ == 0; }
  void allgather(void*, const std::vector<size_t>&) override {}
  void gather_to_rank0(const void*, void*, const std::vector<size_t>&) override {}
  void copy_state_from_rank0(void*, size_t) override {}

 private:
  int parts_, part_;
};

// optimizer.decay "matrices" on a sharded optimizer: each shard is handed the whole model's
// exempt ranges (of all P) and keeps the pieces inside its part. Ranges that straddle the
// parts' boundaries (3 parts of 1001: [0, 336), [336, 672), [672, 1001); 7 parts: every 144)
// must update as the whole optimizer with the same ranges does, bit for bit.
template <typename T>
void check_exempt_parts_match_whole(const optim::OptimizerConfig& config, int parts) {
  const Index p = 1001;
  const optim::ParameterRanges exempt = {{3, 20}, {100, 260}, {330, 340}, {600, 1001}};
  std::vector<T> whole_params(p), params(p), grads(p);
  for (Index i = 0; i < p; ++i) whole_params[i] = params[i] = static_cast<T>(std::sin(0.37 * static_cast<double>(i)));
  const std::vector<T> start = params;
  auto whole = optim::make_update_rule<T>(config, p);
  whole->exempt_from_decay(exempt);
  std::vector<std::unique_ptr<Optimizer<T>>> shards;
  for (int s = 0; s < parts; ++s) {
    shards.push_back(std::make_unique<Optimizer<T>>(config, p, std::make_unique<OnePartOfANode>(parts, s)));
    shards.back()->exempt_from_decay(exempt);
  }
  // The same steps with decay everywhere: where they differ from the exempt run, the ranges
  // reached the parts.
  auto decayed = optim::make_update_rule<T>(config, p);
  std::vector<T> decayed_params = start;
  for (int step = 1; step <= 3; ++step) {
    for (Index i = 0; i < p; ++i) grads[i] = static_cast<T>(std::cos(0.11 * static_cast<double>(i * step)) * 0.5);
    whole->step(whole_params.data(), grads.data(), config.lr);
    decayed->step(decayed_params.data(), grads.data(), config.lr);
    for (auto& shard : shards) shard->step(params.data(), grads.data(), config.lr);
  }
  EXPECT_TRUE(same_bits(params, whole_params)) << config.type << " in " << parts << " parts";
  for (const auto& [begin, end] : exempt)
    for (Index i = begin; i < end; ++i) ASSERT_NE(params[i], decayed_params[i]) << config.type << ", exempt " << i;
  for (const Index i : {1, 20, 340, 599}) EXPECT_EQ(params[i], decayed_params[i]) << "not exempt: " << i;
}

TEST(Optimizer, ExemptRangesAreCutIntoTheParts) {
  for (const int parts : {2, 3, 7})
    for (const auto& config : {optimizer("sgd", 0.9, 0.1), optimizer("adamw", 0.0, 0.1), optimizer("adam", 0.0, 0.1)}) {
      check_exempt_parts_match_whole<float>(config, parts);
      check_exempt_parts_match_whole<double>(config, parts);
    }
}

TEST(Optimizer, OneProcessHoldsTheWholeState) {
  distributed::LocalCommunicator one;
  Optimizer<float> shard(optimizer("adam"), 1001, distributed::part_exchange(one, distributed::ShardScope::kNode));
  EXPECT_EQ(shard.begin(), 0);
  EXPECT_EQ(shard.end(), 1001);
  EXPECT_EQ(shard.local().state_buffers()[0].values->size(), 1001u);
  // The whole state for a checkpoint is the gathered one part: equal to the local state.
  (*shard.local().state_buffers()[1].values)[1000] = 3.0f;
  const auto whole = shard.whole_on_rank0();
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ((*whole->state_buffers()[1].values)[1000], 3.0f);
}

}  // namespace
}  // namespace mpiddp::optim
