// compute.gemm=auto measures once per machine, build, thread count and model and then reads
// the answer back (Note [the choice is remembered]); a damaged cache is measured anew, and a
// cache that cannot be written does not stop a run.
#include "mpiddp/train/gemm_choice.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace mpiddp::train {
namespace {

class GemmChoiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("mpiddp-gemm-choice-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    ::setenv("MPIDDP_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("MPIDDP_CACHE_DIR");
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path cache_file() const { return dir_ / "cache" / "gemm.json"; }
  std::filesystem::path dir_;
  // A small model's products: forward, weight and input gradients of a 64 -> 32 layer.
  const std::vector<kernels::GemmCall> calls_{
      {{32, 16, 64, kernels::Op::kTranspose, kernels::Op::kNone}, 1, kernels::GemmRole::kForward},
      {{64, 32, 16, kernels::Op::kNone, kernels::Op::kTranspose}, 1, kernels::GemmRole::kWeightGradient},
      {{64, 16, 32, kernels::Op::kNone, kernels::Op::kNone}, 1, kernels::GemmRole::kInputGradient}};
};

TEST_F(GemmChoiceTest, MeasuresOnceThenReadsTheCache) {
  const GemmChoice first = choose_gemm<float>("auto", calls_, 1);
  EXPECT_EQ(first.how, "measured");
  EXPECT_EQ(first.timings.size(), kernels::available_gemm_backends().size());
  for (const auto& t : first.timings) EXPECT_GT(t.seconds, 0.0);
  EXPECT_EQ(first.cache, cache_file().string());
  ASSERT_TRUE(std::filesystem::exists(cache_file()));
  const GemmChoice again = choose_gemm<float>("auto", calls_, 1);
  EXPECT_EQ(again.how, "cached");
  EXPECT_EQ(again.backend, first.backend);
  // Another thread count, model or number type is another entry, measured on its own.
  EXPECT_EQ(choose_gemm<float>("auto", calls_, 2).how, "measured");
  EXPECT_EQ(choose_gemm<double>("auto", calls_, 1).how, "measured");
  EXPECT_EQ(choose_gemm<float>("auto", {calls_[0]}, 1).how, "measured");
  EXPECT_EQ(choose_gemm<float>("auto", calls_, 1).how, "cached");
  const auto record = gemm_record(again);
  EXPECT_EQ(record["chosen"], "cached");
  EXPECT_EQ(record["backend"], kernels::gemm_backend_name(first.backend));
  EXPECT_TRUE(record.contains("seconds"));
}

TEST_F(GemmChoiceTest, TheCachedAnswerIsTheOneUsed) {
  choose_gemm<float>("auto", calls_, 1);
  // Rewrite the entry's library: the next run takes what the file says.
  std::ifstream in(cache_file());
  io::Json cache = io::Json::parse(in);
  in.close();
  ASSERT_EQ(cache.size(), 1u);
  for (auto& entry : cache) entry["backend"] = "eigen";
  std::ofstream(cache_file()) << cache.dump();
  const GemmChoice read = choose_gemm<float>("auto", calls_, 1);
  EXPECT_EQ(read.how, "cached");
  EXPECT_EQ(read.backend, kernels::GemmBackend::kEigen);
}

TEST_F(GemmChoiceTest, ADamagedCacheIsMeasuredAnew) {
  std::filesystem::create_directories(cache_file().parent_path());
  std::ofstream(cache_file()) << "{not json";
  EXPECT_EQ(choose_gemm<float>("auto", calls_, 1).how, "measured");
  EXPECT_EQ(choose_gemm<float>("auto", calls_, 1).how, "cached");  // and rewritten whole
}

TEST_F(GemmChoiceTest, AnUnwritableCacheOnlyCostsTheMeasurement) {
  ::setenv("MPIDDP_CACHE_DIR", "/proc/mpiddp-cannot-be-here", 1);
  const GemmChoice choice = choose_gemm<float>("auto", calls_, 1);
  EXPECT_EQ(choice.how, "measured");
  EXPECT_EQ(choice.cache.rfind("none: cannot create", 0), 0u) << choice.cache;
}

TEST_F(GemmChoiceTest, AConfiguredLibraryIsNotMeasured) {
  const GemmChoice choice = choose_gemm<float>("eigen", calls_, 1);
  EXPECT_EQ(choice.how, "config");
  EXPECT_EQ(choice.backend, kernels::GemmBackend::kEigen);
  EXPECT_TRUE(choice.timings.empty());
  EXPECT_FALSE(std::filesystem::exists(cache_file()));
}

}  // namespace
}  // namespace mpiddp::train
