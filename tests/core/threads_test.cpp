#include "mpiddp/core/threads.hpp"

#include <gtest/gtest.h>

namespace mpiddp {
namespace {

constexpr double kBig = 1e9;  // multiply-adds of a typical product: worth a second thread

TEST(Threads, AutoSharesTheNodeAmongItsRanks) {
  // 2 cores: 1 rank uses both, 2 ranks one each, 4 ranks (oversubscribed) still one.
  EXPECT_EQ(choose_threads(0, nullptr, 2, 2, 1, kBig).threads, 2);
  EXPECT_EQ(choose_threads(0, nullptr, 2, 2, 2, kBig).threads, 1);
  EXPECT_EQ(choose_threads(0, nullptr, 2, 2, 4, kBig).threads, 1);
  // 64-core node, 8 ranks: 8 threads each.
  EXPECT_EQ(choose_threads(0, nullptr, 64, 64, 8, kBig).threads, 8);
  EXPECT_EQ(choose_threads(0, nullptr, 64, 64, 8, kBig).source, "auto");
}

TEST(Threads, ALauncherBindingLimitsTheCount) {
  // One rank bound to one core of a 2-core node: both threads would share that core.
  EXPECT_EQ(choose_threads(0, nullptr, 1, 2, 1, kBig).threads, 1);
}

TEST(Threads, SmallProductsStaySingleThreaded) {
  // A model of small products only, the seed workload's (64 x 64 x 32 and smaller) or the
  // cnn's per-sample convolutions (196 x 32 x 288), runs on one thread; the mlp's
  // 128 x 1024 x 784 takes two.
  EXPECT_EQ(choose_threads(0, nullptr, 2, 2, 1, 64.0 * 64 * 32).threads, 1);
  EXPECT_EQ(choose_threads(0, nullptr, 2, 2, 1, 196.0 * 32 * 288).threads, 1);
  EXPECT_EQ(choose_threads(0, nullptr, 2, 2, 1, 128.0 * 1024 * 784).threads, 2);
  EXPECT_EQ(choose_threads(0, nullptr, 2, 2, 1, kMinParallelProduct).threads, 2);
  // An explicit request still wins.
  EXPECT_EQ(choose_threads(2, nullptr, 2, 2, 1, 64.0 * 64 * 32).threads, 2);
}

TEST(Threads, AutoPutsEachSmallProductOnOneThread) {
  // With two threads, each product then takes one thread or both by its own size
  // (kernels::use_one_thread_below): the mlp's last layer, 128 x 10 x 1024, one.
  EXPECT_EQ(choose_threads(0, nullptr, 2, 2, 1, kBig).one_thread_below, kMinParallelProduct);
  EXPECT_LT(128.0 * 10 * 1024, kMinParallelProduct);
  // An explicit count, from the config or OpenMP's variable, runs every product on it.
  EXPECT_EQ(choose_threads(2, nullptr, 2, 2, 1, kBig).one_thread_below, 0.0);
  EXPECT_EQ(choose_threads(0, "2", 2, 2, 1, kBig).one_thread_below, 0.0);
}

TEST(Threads, ConfigThenEnvironmentOverride) {
  EXPECT_EQ(choose_threads(3, "5", 2, 2, 2, kBig).threads, 3);
  EXPECT_EQ(choose_threads(3, "5", 2, 2, 2, kBig).source, "config");
  EXPECT_EQ(choose_threads(0, "5", 2, 2, 2, kBig).threads, 5);
  EXPECT_EQ(choose_threads(0, "5", 2, 2, 2, kBig).source, "OMP_NUM_THREADS");
  EXPECT_EQ(choose_threads(0, "4,2", 2, 2, 2, kBig).threads, 4);  // nested list: first level
  // Not a positive number: ignored, as OpenMP ignores it.
  EXPECT_EQ(choose_threads(0, "lots", 2, 2, 1, kBig).threads, 2);
  EXPECT_EQ(choose_threads(0, "0", 2, 2, 1, kBig).threads, 2);
  EXPECT_EQ(choose_threads(0, "", 2, 2, 1, kBig).threads, 2);
}

TEST(Threads, UseThreadsSetsEigen) {
  use_threads(1);
  EXPECT_EQ(threads_in_use(), 1);
  use_threads(2);
  EXPECT_EQ(threads_in_use(), 2);
  use_threads(1);
}

}  // namespace
}  // namespace mpiddp
