// The GPT recipe's two optimizer options, without a launcher.
//
// optimizer.clip_grad_norm (optim/gradient_clip.hpp): the norm of hand-made gradients, the
// coefficient (1 / (norm + 1e-6)) * max_norm applied only when below 1, and the norm on the
// fixed-point grid (Note [the norm on a grid]) the same bits whether a gradient is held whole
// or cut into parts, each part on a thread of its own that meets the others in the two
// combining calls as ranks meet in a collective; and the optimizer shard's step, whole and
// cut across a simulated world, to the same bits.
//
// optimizer.decay "matrices" (UpdateRule::exempt_from_decay): one step of sgd, adam and adamw
// on a buffer with runs exempt from weight decay, against the update rules of optim/sgd.hpp
// and optim/adam.hpp by hand and against optimizers that decay all or nothing.
#include "mpiddp/optim/gradient_clip.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <thread>
#include <vector>

#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/optim/update_rule.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "../support/gradient_check.hpp"

namespace mpiddp::optim {
namespace {

using mpiddp::testing::test_values;

// The whole gradient on every rank: the exchange's combining calls are the defaults (the
// value itself).
std::unique_ptr<distributed::PartExchange> whole_on_every_rank() {
  static distributed::LocalCommunicator one;
  return distributed::part_exchange(one, distributed::ShardScope::kNone);
}

template <typename T>
double norm_of(std::vector<T> values) {
  return gradient_norm(values.data(), static_cast<Index>(values.size()), static_cast<Index>(values.size()),
                       *whole_on_every_rank());
}

uint64_t bits(double value) { return std::bit_cast<uint64_t>(value); }

template <typename T>
class NormAndClip : public ::testing::Test {};
using RealTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(NormAndClip, RealTypes);

TYPED_TEST(NormAndClip, HandValues) {
  using T = TypeParam;
  // {3, 4}: largest square 16 = 0.5 * 2^5 and 2 terms (h = 1) set the grid 2^(62 - 1 - 5) =
  // 2^56, where 9 and 16 are whole numbers: the sum is 25 * 2^56 exactly, its root 5.
  EXPECT_EQ(norm_of<T>({3, 4}), 5.0);
  EXPECT_EQ(norm_of<T>({-3, 4}), 5.0);            // the signs square away
  EXPECT_EQ(norm_of<T>({1, -2, 2}), 3.0);         // 1 + 4 + 4 = 9
  EXPECT_EQ(norm_of<T>({0, 0.5, 0, 0}), 0.5);     // 0.25, one term of four
  EXPECT_EQ(norm_of<T>({0, 0, 0}), 0.0);          // no largest value: no grid, 0
  EXPECT_EQ(norm_of<T>({}), 0.0);
}

TYPED_TEST(NormAndClip, TheWholesCountSetsTheGrid) {
  using T = TypeParam;
  // Two values of a gradient of 2^40: h = 40 and the largest square 1 = 0.5 * 2^1 set the grid
  // 2^-(62 - 40 - 1) = 2^-21. (2^-11)^2 = 2^-22 is half a step, rounded to even: nothing;
  // (3 * 2^-12)^2 = 9 * 2^-24 is 1.125 steps: one. Of a gradient of 2 (grid 2^-60) both are exact.
  const T half_step = static_cast<T>(std::ldexp(1.0, -11)), steps = static_cast<T>(3 * std::ldexp(1.0, -12));
  const Index huge = Index{1} << 40;
  const std::vector<T> a = {1, half_step}, b = {1, steps};
  EXPECT_EQ(gradient_norm(a.data(), 2, huge, *whole_on_every_rank()), 1.0);
  EXPECT_EQ(gradient_norm(b.data(), 2, huge, *whole_on_every_rank()), std::sqrt(1 + std::ldexp(1.0, -21)));
  EXPECT_EQ(norm_of(a), std::sqrt(1 + std::ldexp(1.0, -22)));
  EXPECT_EQ(norm_of(b), std::sqrt(1 + 9 * std::ldexp(1.0, -24)));
}

TEST(GradientNorm, AgreesWithTheExactNormWithinTheGridsBound) {
  // 3000 values: 2^12 terms at most (h = 12), each square rounded by at most half a step of a
  // grid 2^(62 - 12) below the largest square's power of two, which is at most twice the
  // sum: the sum is within 2^(2 * 12 - 62) = 3.6e-12 relative, its root half of that.
  const Index n = 3000;
  const std::vector<double> u = test_values(n, 3), e = test_values(n, 4);
  std::vector<double> g(n);
  long double exact = 0;
  for (Index i = 0; i < n; ++i) {
    g[i] = u[i] * std::pow(10.0, 4.0 * e[i] - 2.0);
    exact += static_cast<long double>(g[i]) * g[i];
  }
  const double expected = static_cast<double>(std::sqrt(exact));
  EXPECT_NEAR(norm_of(g), expected, 1.8e-12 * expected);
}

TYPED_TEST(NormAndClip, ClipsByPyTorchsCoefficientOnlyBelowOne) {
  using T = TypeParam;
  // norm 5, max_norm 1: coefficient (1 / (5 + 1e-6)) * 1 in T, 0.2 (1 - 2e-7) to 7 digits:
  // 3 -> 0.59999988, 4 -> 0.79999984.
  const T coefficient = clip_coefficient<T>(5.0, 1.0);
  EXPECT_EQ(coefficient, (T(1) / (T(5) + T(1e-6))) * T(1));
  EXPECT_NEAR(T(3) * coefficient, 0.6 * (1 - 2e-7), 1e-7);
  EXPECT_NEAR(T(4) * coefficient, 0.8 * (1 - 2e-7), 1e-7);
  // max_norm 2.5: coefficient (1 / (5 + 1e-6)) * 2.5, about 0.5.
  EXPECT_EQ(clip_coefficient<T>(5.0, 2.5), (T(1) / (T(5) + T(1e-6))) * T(2.5));
  EXPECT_NEAR(T(4) * clip_coefficient<T>(5.0, 2.5), 2.0, 1e-6);
  // At the norm itself the coefficient 5 / (5 + 1e-6) is still below 1: PyTorch multiplies too.
  EXPECT_EQ(clip_coefficient<T>(5.0, 5.0), (T(1) / (T(5) + T(1e-6))) * T(5));
  EXPECT_LT(clip_coefficient<T>(5.0, 5.0), T(1));
  // Below max_norm (coefficient about 2), and a norm of 0 (coefficient 1e6): 1, nothing clipped.
  EXPECT_EQ(clip_coefficient<T>(5.0, 10.0), T(1));
  EXPECT_EQ(clip_coefficient<T>(0.0, 10.0), T(1));
}

// The update applies the coefficient as it reads each gradient: the bits of clip_grad_norm_'s
// multiplication in place followed by the update, for AdamW, Adam with L2 decay and SGD's three
// loops (plain, momentum, with decay), and the gradient buffer left as it was. The decays add to
// the scaled gradient: were the compiler to fuse the scaling into that addition (an FMA of
// g and the coefficient), the sum would round once where the in-place path rounds twice, and the
// bits would part here (Note [the decay's one rounding] in src/optim/adam.cpp): they did,
// before the decay was written as its fma. 37 parameters: the vector loops and their tails.
TYPED_TEST(NormAndClip, TheUpdateScalesAsClippingInPlaceWould) {
  using T = TypeParam;
  OptimizerConfig adamw;
  adamw.type = "adamw";
  adamw.weight_decay = 0.1;
  OptimizerConfig adam_l2 = adamw;
  adam_l2.type = "adam";
  OptimizerConfig plain;
  plain.type = "sgd";
  OptimizerConfig momentum = plain;
  momentum.momentum = 0.9;
  OptimizerConfig decayed = momentum;
  decayed.weight_decay = 0.01;
  const T coefficient = clip_coefficient<T>(7.25, 1.0);
  ASSERT_LT(coefficient, T(1));
  constexpr Index kCount = 37;
  for (const OptimizerConfig& config : {adamw, adam_l2, plain, momentum, decayed}) {
    auto fused = make_update_rule<T>(config, kCount);
    auto in_place = make_update_rule<T>(config, kCount);
    std::vector<T> p_fused(kCount);
    for (Index i = 0; i < kCount; ++i) p_fused[i] = T(std::sin(0.7 * static_cast<double>(i + 1)));
    std::vector<T> p_in_place = p_fused;
    for (int step = 0; step < 3; ++step) {  // momentum's first step and the ones after
      std::vector<T> g(kCount);
      for (Index i = 0; i < kCount; ++i) g[i] = T(3.1 * std::cos(1.3 * static_cast<double>(i) + step));
      const std::vector<T> read = g;
      std::vector<T> clipped = g;
      for (T& v : clipped) v *= coefficient;
      // lr 1: a difference in the last bit of a gradient shows in the parameters too, and the
      // state (momentum, Adam's moments) holds the gradients at their own scale.
      fused->step(p_fused.data(), g.data(), 1.0, coefficient);
      in_place->step(p_in_place.data(), clipped.data(), 1.0);
      EXPECT_EQ(p_fused, p_in_place) << config.type << " momentum " << config.momentum << " step " << step;
      const auto fused_state = fused->state_buffers(), in_place_state = in_place->state_buffers();
      ASSERT_EQ(fused_state.size(), in_place_state.size());
      for (size_t b = 0; b < fused_state.size(); ++b)
        EXPECT_EQ(*fused_state[b].values, *in_place_state[b].values) << config.type << " " << fused_state[b].name;
      EXPECT_EQ(g, read);  // read, not written
    }
  }
}

// Note [parts on threads]: n parts of one gradient, each on a thread of its own as on a rank
// of its own. Each combining call writes the part's value, meets the others at a barrier,
// combines them all (the largest; the int64 sum, exact in any order), and meets them again
// before the next call may overwrite the values: a collective, as PartsOfTheWorld's
// allreduces are.
class SimulatedWorld {
 public:
  explicit SimulatedWorld(int parts) : meet_(parts), largest_(parts), sums_(parts) {}
  int parts() const { return static_cast<int>(largest_.size()); }
  double largest(int part, double value) {
    largest_[part] = value;
    meet_.arrive_and_wait();
    const double all = *std::max_element(largest_.begin(), largest_.end());
    meet_.arrive_and_wait();
    return all;
  }
  int64_t sum(int part, int64_t value) {
    sums_[part] = value;
    meet_.arrive_and_wait();
    int64_t all = 0;
    for (const int64_t s : sums_) all += s;
    meet_.arrive_and_wait();
    return all;
  }

 private:
  std::barrier<> meet_;
  std::vector<double> largest_;
  std::vector<int64_t> sums_;
};

// Part `part` of a SimulatedWorld, as a rank holding its world part. The parts share one
// buffer (each writes only its own part of it), so nothing needs gathering.
class PartOfTheWorld final : public distributed::PartExchange {
 public:
  PartOfTheWorld(SimulatedWorld& world, int part) : world_(world), part_(part) {}
  distributed::ShardScope scope() const override { return distributed::ShardScope::kWorld; }
  int parts() const override { return world_.parts(); }
  int part() const override { return part_; }
  bool is_rank0() const override { return part_ == 0; }
  void allgather(void*, const std::vector<size_t>&) override {}
  void gather_to_rank0(const void*, void*, const std::vector<size_t>&) override {}
  void copy_state_from_rank0(void*, size_t) override {}
  double largest_of_gradient_parts(double value) override { return world_.largest(part_, value); }
  int64_t sum_of_gradient_parts(int64_t value) override { return world_.sum(part_, value); }

 private:
  SimulatedWorld& world_;
  int part_;
};

// Runs work(part, world) for every part of an n-part world, each on its own thread.
template <typename Work>
void on_every_part(int parts, Work work) {
  SimulatedWorld world(parts);
  std::vector<std::thread> threads;
  for (int p = 0; p < parts; ++p) threads.emplace_back([&world, &work, p] { work(p, world); });
  for (std::thread& t : threads) t.join();
}

// count values with magnitudes over eight decades, |g| in [1e-6, 1e2) times a uniform factor.
template <typename T>
std::vector<T> spread_gradient(Index count, unsigned seed) {
  const std::vector<double> u = test_values(count, seed), e = test_values(count, seed + 1);
  std::vector<T> g(count);
  for (Index i = 0; i < count; ++i) g[i] = static_cast<T>(u[i] * std::pow(10.0, 4.0 * e[i] - 2.0));
  return g;
}

// The norm of g cut at `cuts` (ascending, from 0 to its size), part by part on threads: every
// part's answer, in part order.
template <typename T>
std::vector<double> norms_by_parts(const std::vector<T>& g, const std::vector<Index>& cuts) {
  const int parts = static_cast<int>(cuts.size()) - 1;
  std::vector<double> norms(parts);
  on_every_part(parts, [&](int p, SimulatedWorld& world) {
    PartOfTheWorld exchange(world, p);
    norms[p] = gradient_norm(g.data() + cuts[p], cuts[p + 1] - cuts[p], static_cast<Index>(g.size()), exchange);
  });
  return norms;
}

template <typename T>
void expect_parts_give_the_whole_norm(Index count, unsigned seed) {
  const std::vector<T> g = spread_gradient<T>(count, seed);
  const double whole = norm_of(g);
  ASSERT_GT(whole, 1.0);
  std::vector<std::vector<Index>> cuts;
  for (const int parts : {2, 3, 5}) {
    std::vector<Index> by_lines;  // as the optimizer shard cuts: whole cache lines
    for (int r = 0; r <= parts; ++r) by_lines.push_back(part_begin(count, parts, r, sizeof(T)));
    cuts.push_back(by_lines);
  }
  cuts.push_back({0, 1, count / 3 + 7, count});                 // ragged
  cuts.push_back({0, count / 2, count / 2, count - 1, count});  // with an empty part
  for (const std::vector<Index>& cut : cuts) {
    const std::vector<double> norms = norms_by_parts(g, cut);
    for (size_t p = 0; p < norms.size(); ++p)
      EXPECT_EQ(bits(norms[p]), bits(whole)) << count << " values in " << norms.size() << " parts, part " << p
                                             << ": " << norms[p] << " against " << whole;
  }
}

TEST(GradientNorm, PartsGiveTheWholesBitsForFloatAndDouble) {
  for (const Index count : {Index{3001}, Index{4096}, Index{10}}) {
    expect_parts_give_the_whole_norm<float>(count, 11);
    expect_parts_give_the_whole_norm<double>(count, 12);
  }
}

TEST(GradientNorm, TheDataTellsGroupingsApart) {
  // What the grid is for: on this data a double sum of squares cut into two parts, the parts'
  // sums then added, is not the whole's sum in every cut; the grid's norm is (above).
  const std::vector<double> g = spread_gradient<double>(3001, 12);
  double whole = 0;
  for (const double v : g) whole += v * v;
  int differing = 0;
  for (Index cut = 1; cut < 3001; cut += 100) {
    double first = 0, second = 0;
    for (Index i = 0; i < cut; ++i) first += g[i] * g[i];
    for (Index i = cut; i < 3001; ++i) second += g[i] * g[i];
    differing += first + second != whole;
  }
  EXPECT_GT(differing, 0);
}

TEST(GradientNorm, PartsOfTheWorldCarryAnInt64SumInTwoHalves) {
  // On one rank the sum over the ranks is the value itself: its two 32-bit halves, sent as
  // doubles, must make it again, whatever its bits.
  distributed::LocalCommunicator one;
  const auto world = distributed::part_exchange(one, distributed::ShardScope::kWorld);
  for (const int64_t v : {int64_t{0}, int64_t{1}, int64_t{0xFFFFFFFF}, int64_t{1} << 32, (int64_t{1} << 62) + 12345,
                          std::numeric_limits<int64_t>::max(), int64_t{-1}, std::numeric_limits<int64_t>::min()})
    EXPECT_EQ(world->sum_of_gradient_parts(v), v);
  EXPECT_EQ(world->largest_of_gradient_parts(2.5), 2.5);
}

OptimizerConfig clipped_sgd(double clip) {
  OptimizerConfig c;
  c.type = "sgd";
  c.lr = 1.0;
  c.clip_grad_norm = clip;
  return c;
}

TEST(OptimizerClipping, ReturnsTheNormAndStepsWithTheClippedGradients) {
  // g = (3, 4): norm 5 > 1, so the update reads g as (3, 4) c with c = (1 / (5 + 1e-6)) * 1, and
  // sgd with lr 1 moves p = 0 to -g c. The gradient buffer is read, not scaled in place.
  Optimizer<double> shard(clipped_sgd(1.0), 2, whole_on_every_rank());
  std::vector<double> p = {0, 0}, g = {3, 4};
  EXPECT_EQ(shard.step(p.data(), g.data(), 1.0), 5.0);
  const double c = (1.0 / (5.0 + 1e-6)) * 1.0;
  EXPECT_EQ(g, (std::vector<double>{3, 4}));
  EXPECT_EQ(p, (std::vector<double>{-3 * c, -4 * c}));
  // Off: NaN, and the whole gradient applied.
  Optimizer<double> plain(clipped_sgd(0.0), 2, whole_on_every_rank());
  p = {0, 0};
  EXPECT_TRUE(std::isnan(plain.step(p.data(), g.data(), 1.0)));
  EXPECT_EQ(p, (std::vector<double>{-3, -4}));
}

template <typename T>
void expect_world_parts_step_as_the_whole(int parts) {
  const Index count = 3001;
  OptimizerConfig config = clipped_sgd(1.0);
  config.type = "adamw";
  config.lr = 0.01;
  config.weight_decay = 0.1;
  const std::vector<T> start = spread_gradient<T>(count, 5), gradient = spread_gradient<T>(count, 7);
  std::vector<T> whole_p = start, whole_g = gradient;
  Optimizer<T> whole(config, count, whole_on_every_rank());
  const double whole_norm = whole.step(whole_p.data(), whole_g.data(), config.lr);
  ASSERT_GT(whole_norm, 1.0);  // clipped

  std::vector<T> p = start, g = gradient;
  std::vector<double> norms(parts);
  on_every_part(parts, [&](int part, SimulatedWorld& world) {
    // Each part's optimizer holds its part's state only; its step clips and updates the part.
    Optimizer<T> shard(config, count, std::make_unique<PartOfTheWorld>(world, part));
    norms[part] = shard.step(p.data(), g.data(), config.lr);
  });
  for (int part = 0; part < parts; ++part) EXPECT_EQ(bits(norms[part]), bits(whole_norm)) << "part " << part;
  EXPECT_EQ(g, gradient) << parts << " parts: the gradients, read only";
  EXPECT_EQ(p, whole_p) << parts << " parts: the parameters";
}

TEST(OptimizerClipping, WorldPartsStepAsTheWholeBitForBit) {
  for (const int parts : {2, 3, 5}) {
    expect_world_parts_step_as_the_whole<float>(parts);
    expect_world_parts_step_as_the_whole<double>(parts);
  }
}

// optimizer.decay "matrices" ---------------------------------------------------------------

OptimizerConfig decaying(const char* type, double weight_decay, double momentum = 0.0) {
  OptimizerConfig c;
  c.type = type;
  c.lr = 0.1;
  c.weight_decay = weight_decay;
  c.momentum = momentum;
  return c;
}

// p = (1, 2, 3, 4, 5, 6), g = 0.5 everywhere, parameters [1, 3) and [5, 6) exempt.
const ParameterRanges kExempt = {{1, 3}, {5, 6}};
const std::vector<bool> kIsExempt = {false, true, true, false, false, true};

template <typename T>
std::vector<T> after_steps(const OptimizerConfig& config, const ParameterRanges* exempt, int steps = 1) {
  auto optimizer = make_update_rule<T>(config, 6);
  if (exempt) optimizer->exempt_from_decay(*exempt);
  std::vector<T> p = {1, 2, 3, 4, 5, 6};
  const std::vector<T> g(6, T(0.5));
  for (int s = 0; s < steps; ++s) optimizer->step(p.data(), g.data(), config.lr);
  return p;
}

TEST(DecayMatrices, SgdHandValues) {
  // Decayed: p - lr (g + wd p) = p - 0.1 (0.5 + 0.1 p): 1 -> 0.94, 4 -> 3.91, 5 -> 4.9.
  // Exempt:  p - lr g = p - 0.05: 2 -> 1.95, 3 -> 2.95, 6 -> 5.95.
  const std::vector<double> p = after_steps<double>(decaying("sgd", 0.1), &kExempt);
  const std::vector<double> expected = {0.94, 1.95, 2.95, 3.91, 4.9, 5.95};
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(p[i], expected[i], 1e-15) << i;
}

TEST(DecayMatrices, AdamWHandValues) {
  // Step 1 with g = 0.5: m = 0.05, v = 0.00025, bias corrections 0.1 and 0.001, so the Adam
  // step is lr / 0.1 * 0.05 / (sqrt(0.00025 / 0.001) + 1e-8) = 0.05 / (0.5 + 1e-8) = u.
  // Decayed: p (1 - lr wd) - u = 0.999 p - u; exempt: p - u.
  const std::vector<double> p = after_steps<double>(decaying("adamw", 0.01), &kExempt);
  const double u = 0.05 / (0.5 + 1e-8);
  for (size_t i = 0; i < 6; ++i) {
    const double start = static_cast<double>(i + 1);
    EXPECT_NEAR(p[i], (kIsExempt[i] ? start : 0.999 * start) - u, 1e-14) << i;
  }
}

TEST(DecayMatrices, AdamL2HandValues) {
  // Adam's L2 decay joins the gradient: g = 0.5 + 0.1 p, m = 0.1 g, v = 0.001 g^2, and the
  // step is g / (g + 1e-8) (~1 lr = 0.1). Exempt: g = 0.5, the same step 0.5 / (0.5 + 1e-8).
  const std::vector<double> p = after_steps<double>(decaying("adam", 0.1), &kExempt);
  for (size_t i = 0; i < 6; ++i) {
    const double start = static_cast<double>(i + 1);
    const double g = kIsExempt[i] ? 0.5 : 0.5 + 0.1 * start;
    EXPECT_NEAR(p[i], start - 0.1 * g / (g + 1e-8), 1e-14) << i;
  }
}

// Exempt parameters get exactly the bits of an optimizer without weight decay, the others
// those of one that decays everything, after several steps (the step count and the state
// are shared by the runs), in float and double.
template <typename T>
void expect_runs_as_separate_optimizers(const OptimizerConfig& config) {
  OptimizerConfig none = config;
  none.weight_decay = 0.0;
  const std::vector<T> mixed = after_steps<T>(config, &kExempt, 3);
  const std::vector<T> decayed = after_steps<T>(config, nullptr, 3);
  const std::vector<T> plain = after_steps<T>(none, nullptr, 3);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_NE(decayed[i], plain[i]) << i;  // decay changes every parameter: the check means something
    EXPECT_EQ(mixed[i], kIsExempt[i] ? plain[i] : decayed[i]) << config.type << ", parameter " << i;
  }
}

TEST(DecayMatrices, ExemptRunsUpdateAsWithoutDecayBitForBit) {
  for (const OptimizerConfig& config : {decaying("sgd", 0.1), decaying("sgd", 0.1, 0.9), decaying("adam", 0.1),
                                        decaying("adamw", 0.1)}) {
    expect_runs_as_separate_optimizers<float>(config);
    expect_runs_as_separate_optimizers<double>(config);
  }
}

TEST(DecayMatrices, RangesAreClampedAndMayBeEmptyOrAll) {
  const OptimizerConfig config = decaying("adamw", 0.1);
  OptimizerConfig none = config;
  none.weight_decay = 0.0;
  const ParameterRanges nothing = {}, everything = {{0, 6}}, past_the_end = {{4, 40}}, empty = {{2, 2}};
  EXPECT_EQ(after_steps<double>(config, &nothing), after_steps<double>(config, nullptr));
  EXPECT_EQ(after_steps<double>(config, &empty), after_steps<double>(config, nullptr));
  EXPECT_EQ(after_steps<double>(config, &everything), after_steps<double>(none, nullptr));
  const std::vector<double> tail = after_steps<double>(config, &past_the_end);
  const std::vector<double> decayed = after_steps<double>(config, nullptr), plain = after_steps<double>(none, nullptr);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(tail[i], i < 4 ? decayed[i] : plain[i]) << i;
}

}  // namespace
}  // namespace mpiddp::optim
