// Deterministic mode's `auto` library (Note [deterministic mode's library] in
// train/deterministic_gemm.hpp): a rule of the build, the CPU's features and the pass's
// shapes, checked here on feature and shape sets no single machine has; and the choice
// neither reads nor writes the default mode's timing cache, so a cache entry that names
// another library, or no cache at all, changes nothing.
#include "mpiddp/train/deterministic_gemm.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../support/layer_harness.hpp"
#include "mpiddp/kernels/gemm_columns.hpp"

namespace mpiddp::train {
namespace {

using kernels::GemmBackend;
using kernels::GemmCall;
using kernels::GemmRole;
using kernels::Op;

// A linear layer's forward and input-gradient products at `columns` samples, as
// Linear::gemm_calls makes them: forward (out, n) = W (out, in) x (in, n), input gradient
// (in, n) = W^T dy (out, n).
void add_linear(std::vector<GemmCall>& calls, Index in, Index out, Index columns) {
  calls.push_back({{out, columns, in, Op::kTranspose, Op::kNone}, 1, GemmRole::kForward});
  calls.push_back({{in, columns, out, Op::kNone, Op::kNone}, 1, GemmRole::kInputGradient});
}

// A Zen 5 (AVX-512), a native build with every library, and the cli_deterministic_library
// model (64 -> 256 -> 192 -> 10) at its widest piece of 128 columns: sorted by size, the
// products are 10 x 192 (245,760 multiply-adds, twice), 64 x 256 (2,097,152, twice) and
// 256 x 192 (6,291,456, twice) at 128 columns, 17,268,736 in all; the first two sizes sum to
// 4,685,824 < half, with the third 10,977,280 >= half: the typical product is 6,291,456.
GemmRuleInputs zen5_inputs() {
  GemmRuleInputs in;
  in.chunked_pass = true;
  in.native_build = true;
  in.built = {GemmBackend::kEigen, GemmBackend::kOpenBlas, GemmBackend::kBlis, GemmBackend::kOneDnn};
  in.float32 = true;
  in.cpu = {/*avx512f=*/true};
  add_linear(in.products, 64, 256, 128);
  add_linear(in.products, 256, 192, 128);
  add_linear(in.products, 192, 10, 128);
  return in;
}

TEST(DeterministicGemmRule, LargeFloatProductsOnAvx512TakeOneDnn) {
  const GemmRule rule = deterministic_gemm_rule(zen5_inputs());
  EXPECT_EQ(rule.backend, GemmBackend::kOneDnn);
  EXPECT_EQ(rule.text,
            "chunked pass, native build, onednn built in, float32, cpu avx512f, "
            "typical product 6291456 multiply-adds >= 1048576: onednn");
}

TEST(DeterministicGemmRule, Avx2KeepsEigen) {
  GemmRuleInputs in = zen5_inputs();
  in.cpu = {false};  // a Zen 3: AVX2, no AVX-512
  const GemmRule rule = deterministic_gemm_rule(in);
  EXPECT_EQ(rule.backend, GemmBackend::kEigen);
  EXPECT_EQ(rule.text, "chunked pass, native build, onednn built in, float32, cpu no-avx512f: eigen");
  // Whatever the shapes: mlp's products (1024 x 784 at 128 columns, 102,760,448 multiply-adds).
  in.products = {{{1024, 128, 784, Op::kTranspose, Op::kNone}, 1, GemmRole::kForward}};
  EXPECT_EQ(deterministic_gemm_rule(in).backend, GemmBackend::kEigen);
}

TEST(DeterministicGemmRule, EachFailedStepKeepsEigenAndSaysWhy) {
  auto rule_with = [](auto change) {
    GemmRuleInputs in = zen5_inputs();
    change(in);
    return deterministic_gemm_rule(in);
  };
  const GemmRule chunk_by_chunk = rule_with([](GemmRuleInputs& in) { in.chunked_pass = false; });
  EXPECT_EQ(chunk_by_chunk.backend, GemmBackend::kEigen);
  EXPECT_EQ(chunk_by_chunk.text, "chunk by chunk: eigen");
  const GemmRule portable = rule_with([](GemmRuleInputs& in) { in.native_build = false; });
  EXPECT_EQ(portable.backend, GemmBackend::kEigen);
  EXPECT_EQ(portable.text, "chunked pass, portable build: eigen");
  const GemmRule no_onednn =
      rule_with([](GemmRuleInputs& in) { in.built = {GemmBackend::kEigen, GemmBackend::kOpenBlas}; });
  EXPECT_EQ(no_onednn.backend, GemmBackend::kEigen);
  EXPECT_EQ(no_onednn.text, "chunked pass, native build, no onednn built in: eigen");
  const GemmRule float64 = rule_with([](GemmRuleInputs& in) { in.float32 = false; });
  EXPECT_EQ(float64.backend, GemmBackend::kEigen);
  EXPECT_EQ(float64.text, "chunked pass, native build, onednn built in, float64: eigen");
  // Each failed step decides, whatever comes after it: a portable build on an AVX-512 CPU
  // with large products, a float64 model in a native build.
  const GemmRule portable_float64 = rule_with([](GemmRuleInputs& in) {
    in.native_build = false;
    in.float32 = false;
  });
  EXPECT_EQ(portable_float64.text, "chunked pass, portable build: eigen");
}

TEST(DeterministicGemmRule, SmallProductsKeepEigenOnAvx512) {
  // The default experiment's model (6 -> 48 -> 48 -> 1) at 128 columns, sorted: 1 x 48
  // (6,144 multiply-adds, twice), 6 x 48 (36,864, twice), 48 x 48 (294,912, twice); all
  // 675,840, half 337,920; 86,016 below the last size, 380,928 with it: typical 294,912.
  GemmRuleInputs in = zen5_inputs();
  in.products.clear();
  add_linear(in.products, 6, 48, 128);
  add_linear(in.products, 48, 48, 128);
  add_linear(in.products, 48, 1, 128);
  const GemmRule rule = deterministic_gemm_rule(in);
  EXPECT_EQ(rule.backend, GemmBackend::kEigen);
  EXPECT_EQ(rule.text,
            "chunked pass, native build, onednn built in, float32, cpu avx512f, "
            "typical product 294912 multiply-adds < 1048576: eigen");
}

TEST(DeterministicGemmRule, TheBoundIsInclusive) {
  GemmRuleInputs in = zen5_inputs();
  in.products = {{{128, 128, 64, Op::kTranspose, Op::kNone}, 1, GemmRole::kForward}};  // 2^20
  EXPECT_EQ(deterministic_gemm_rule(in).backend, GemmBackend::kOneDnn);
  in.products = {{{127, 128, 64, Op::kTranspose, Op::kNone}, 1, GemmRole::kForward}};
  EXPECT_EQ(deterministic_gemm_rule(in).backend, GemmBackend::kEigen);
}

// The cli_deterministic_library model in float32, 24 chunks of 16 samples.
const char* const kRuleModelLayers = R"([
    {"type": "linear", "out": 256}, {"type": "relu"},
    {"type": "linear", "out": 192}, {"type": "relu"}, {"type": "linear", "out": 10}])";
constexpr Index kRuleChunks = 24;
constexpr Index kRuleChunk = 16;

TEST(DeterministicGemmRule, TheInputsAreThePassesProductsAtItsWidestPiece) {
  const nn::Model<float> model({64}, mpiddp::testing::specs(kRuleModelLayers), kRuleChunks * kRuleChunk);
  const GemmRuleInputs in = deterministic_gemm_rule_inputs(model, kRuleChunk);
  EXPECT_TRUE(in.chunked_pass);
  EXPECT_TRUE(in.float32);
  EXPECT_EQ(in.built, kernels::available_gemm_backends());
  std::vector<GemmCall> expected;  // 128 columns: pieces of 128, 64, 32, 16 for chunks of 16
  add_linear(expected, 64, 256, 128);
  add_linear(expected, 256, 192, 128);
  add_linear(expected, 192, 10, 128);
  ASSERT_EQ(in.products.size(), expected.size());
  for (const GemmCall& call : expected) {
    bool found = false;
    for (const GemmCall& got : in.products) found = found || (got.shape == call.shape && got.role == call.role);
    EXPECT_TRUE(found) << kernels::gemm_shape_text(call.shape);
  }
  // Chunks of 3 samples are not a whole number of Eigen's 4-column panels: chunk by chunk.
  EXPECT_FALSE(deterministic_gemm_rule_inputs(model, 3).chunked_pass);
  const nn::Model<double> model64({64}, mpiddp::testing::specs(kRuleModelLayers), kRuleChunks * kRuleChunk);
  EXPECT_FALSE(deterministic_gemm_rule_inputs(model64, kRuleChunk).float32);
}

class DeterministicGemmCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("mpiddp-deterministic-gemm-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ::setenv("MPIDDP_CACHE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("MPIDDP_CACHE_DIR");
    std::filesystem::remove_all(dir_);
    kernels::use_gemm_backend(GemmBackend::kEigen, 1);
  }
  std::string cache_text() const {
    std::ifstream in(dir_ / "gemm.json");
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  std::filesystem::path dir_;
};

TEST_F(DeterministicGemmCache, AutoNeitherReadsNorWritesTheTimingCache) {
  const nn::Model<float> model({64}, mpiddp::testing::specs(kRuleModelLayers), kRuleChunks * kRuleChunk);
  // With no cache at all (a machine whose cache was cleared): the rule's answer, and no file.
  const DeterministicGemm cleared = choose_deterministic_gemm<float>("auto", model, kRuleChunks, kRuleChunk, kRuleChunk);
  EXPECT_EQ(cleared.choice.how, "rule");
  EXPECT_TRUE(cleared.choice.timings.empty());
  EXPECT_TRUE(cleared.choice.cache.empty());
  EXPECT_FALSE(std::filesystem::exists(dir_)) << "deterministic auto made the cache directory";
  // The rule's own answer, then step 7 (the column check): oneDNN, or Eigen with the reason.
  const GemmRule rule = deterministic_gemm_rule(deterministic_gemm_rule_inputs(model, kRuleChunk));
  EXPECT_EQ(cleared.choice.rule.rfind(rule.text, 0), 0u) << cleared.choice.rule;
  const bool bits_failed = cleared.choice.rule != rule.text;
  if (bits_failed) {
    EXPECT_EQ(cleared.choice.rule, rule.text + ", its column bits do not hold: eigen");
  }
  EXPECT_EQ(cleared.choice.backend, bits_failed ? GemmBackend::kEigen : rule.backend);
  EXPECT_EQ(cleared.full.chunked(), true);  // Eigen's bits hold at chunks of 16

  // The default mode's timed entry for the very products the rule looks at (the entry the
  // previous deterministic `auto` read), made to name another library than the rule's answer.
  const GemmChoice timed = choose_gemm<float>("auto", model.gemm_calls(128), 1);
  ASSERT_EQ(timed.how, "measured");
  io::Json cache = io::Json::parse(cache_text());
  ASSERT_EQ(cache.size(), 1u);
  // On a Zen 3 the rule keeps Eigen where the previous `auto` took a cached oneDNN (its
  // column bits hold there at pieces of one chunk).
  std::string other = "eigen";
  if (cleared.choice.backend == GemmBackend::kEigen) {
    GemmBackend found = GemmBackend::kEigen;
    other = kernels::find_gemm_backend("onednn", &found)
                ? "onednn"
                : kernels::gemm_backend_name(kernels::available_gemm_backends().back());
  }
  for (auto& entry : cache) entry["backend"] = other;
  std::ofstream(dir_ / "gemm.json") << cache.dump(1) << "\n";
  const std::string before = cache_text();
  const auto written = std::filesystem::last_write_time(dir_ / "gemm.json");
  std::filesystem::remove(dir_ / "gemm.lock");

  const DeterministicGemm with_cache = choose_deterministic_gemm<float>("auto", model, kRuleChunks, kRuleChunk, kRuleChunk);
  EXPECT_EQ(with_cache.choice.backend, cleared.choice.backend) << "the cache names " << other;
  EXPECT_EQ(with_cache.choice.rule, cleared.choice.rule);
  EXPECT_EQ(with_cache.full.forward, cleared.full.forward);
  EXPECT_EQ(with_cache.full.input_gradient, cleared.full.input_gradient);
  EXPECT_EQ(cache_text(), before);
  EXPECT_EQ(std::filesystem::last_write_time(dir_ / "gemm.json"), written);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "gemm.lock")) << "deterministic auto took the cache's lock";
}

TEST_F(DeterministicGemmCache, TheRecordSaysWhichRuleChose) {
  const nn::Model<float> model({64}, mpiddp::testing::specs(kRuleModelLayers), kRuleChunks * kRuleChunk);
  const DeterministicGemm chosen = choose_deterministic_gemm<float>("auto", model, kRuleChunks, kRuleChunk, kRuleChunk);
  const io::Json record = gemm_record(chosen.choice);
  EXPECT_EQ(record["chosen"], "rule");
  EXPECT_EQ(record["rule"], chosen.choice.rule);
  EXPECT_EQ(record["backend"], kernels::gemm_backend_name(chosen.choice.backend));
  EXPECT_TRUE(record.contains("library"));
  EXPECT_FALSE(record.contains("seconds"));
  EXPECT_FALSE(record.contains("cache"));
  // A model that goes chunk by chunk (chunks of 3 samples): Eigen, by step 1.
  const DeterministicGemm by_chunk = choose_deterministic_gemm<float>("auto", model, 128, 3, 3);
  EXPECT_EQ(by_chunk.choice.backend, GemmBackend::kEigen);
  EXPECT_EQ(gemm_record(by_chunk.choice)["rule"], "chunk by chunk: eigen");
  EXPECT_FALSE(by_chunk.full.chunked());
  // A library named in compute.gemm is used as named, as before: no rule.
  const DeterministicGemm named = choose_deterministic_gemm<float>("eigen", model, kRuleChunks, kRuleChunk, kRuleChunk);
  EXPECT_EQ(gemm_record(named.choice)["chosen"], "deterministic");
  EXPECT_FALSE(gemm_record(named.choice).contains("rule"));
  EXPECT_FALSE(std::filesystem::exists(dir_));
}

}  // namespace
}  // namespace mpiddp::train
