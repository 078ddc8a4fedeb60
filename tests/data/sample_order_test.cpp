#include "mpiddp/data/sample_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "mpiddp/core/error.hpp"
#include "mpiddp/data/sampler.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/order_file.hpp"
#include "../support/scratch_dir.hpp"

namespace mpiddp::train {
namespace {

RunResult train_with_order(const std::string& order_path) {
  io::Json user = config::default_experiment();
  if (!order_path.empty()) config::apply_override(user, "sampler.order=\"" + order_path + "\"");
  distributed::LocalCommunicator comm;
  return run_training(config::parse_config(user), comm, {.quiet = true});
}

TEST(SampleOrder, ReplayingTheSamplersOwnOrderChangesNothing) {
  // The default experiment: 256 samples, seed 0, 4 epochs, shuffled.
  const std::string dir = test::scratch_dir("order_own");
  std::vector<int64_t> rows;
  for (int64_t e = 0; e < 4; ++e) {
    const auto order = data::epoch_order(256, true, 0, e);
    rows.insert(rows.end(), order.begin(), order.end());
  }
  test::write_order(dir + "/order.npy", {4, 256}, rows);
  const RunResult replayed = train_with_order(dir + "/order.npy");
  const RunResult own = train_with_order("");
  EXPECT_EQ(replayed.step_losses, own.step_losses);
  EXPECT_EQ(replayed.replicas.checksum, own.replicas.checksum);
}

TEST(SampleOrder, TheFirstBatchIsTheHeadOfRowZero) {
  // Row 0 reversed: the first global batch is samples 255, 254, ..., 192.
  const std::string dir = test::scratch_dir("order_reverse");
  std::vector<int64_t> rows(4 * 256);
  for (int64_t i = 0; i < 4 * 256; ++i) rows[i] = 255 - i % 256;
  test::write_order(dir + "/order.npy", {4, 256}, rows);
  const RunResult replayed = train_with_order(dir + "/order.npy");

  distributed::LocalCommunicator comm;
  const config::Config config = config::parse_config(config::default_experiment());
  Trainer<float> probe(config, comm, {.quiet = true});
  probe.model().initialize(config.seed);
  std::vector<Index> head(64);
  for (Index j = 0; j < 64; ++j) head[j] = 255 - j;
  // The step loss travels in the float gradient buffer (Note [the loss rides with the
  // gradients]), so it is the probe's loss rounded to float.
  EXPECT_EQ(replayed.step_losses[0],
            static_cast<double>(static_cast<float>(probe.compute_gradients(head.data(), 64))));
}

TEST(SampleOrder, SplitAcrossRanksLikeTheSampler) {
  // 10 samples on 4 ranks, padded: rank r gets positions r, r+4, r+8 (mod 10) of the row.
  const std::vector<char> unused;
  const std::vector<Index> row = {9, 3, 5, 0, 1, 8, 2, 7, 6, 4};
  for (int rank = 0; rank < 4; ++rank) {
    data::DistributedSampler sampler(10, rank, 4, true, false, 0);
    sampler.set_epoch(0, &row);
    std::vector<Index> expected;
    for (Index k = 0; k < 3; ++k) expected.push_back(row[(k * 4 + rank) % 10]);
    EXPECT_EQ(sampler.indices(), expected) << "rank " << rank;
  }
}

std::string order_error(const std::vector<int64_t>& shape, const std::vector<int64_t>& values) {
  const std::string dir = test::scratch_dir("order_errors");
  test::write_order(dir + "/bad.npy", shape, values);
  try {
    train_with_order(dir + "/bad.npy");
  } catch (const Error& e) {
    EXPECT_TRUE(e.on_every_rank()) << e.what();
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << e.what();
    return e.what();
  }
  return "(no error)";
}

TEST(SampleOrder, ValidationNamesTheProblem) {
  std::vector<int64_t> ok(4 * 256);
  for (size_t i = 0; i < ok.size(); ++i) ok[i] = static_cast<int64_t>(i % 256);
  std::vector<int64_t> bad = ok;
  bad[2 * 256 + 17] = 256;
  EXPECT_NE(order_error({4, 256}, bad).find("row 2, column 17: sample index 256 is outside [0, 256)"),
            std::string::npos);
  bad[2 * 256 + 17] = -1;
  EXPECT_NE(order_error({4, 256}, bad).find("sample index -1"), std::string::npos);
  EXPECT_NE(order_error({3, 256}, std::vector<int64_t>(ok.begin(), ok.begin() + 3 * 256))
                .find("has 3 rows but epochs=4"),
            std::string::npos);
  EXPECT_NE(order_error({4, 128}, std::vector<int64_t>(ok.begin(), ok.begin() + 4 * 128))
                .find("rows have 128 entries but data.train has 256 samples"),
            std::string::npos);
  EXPECT_NE(order_error({1024}, ok).find("expected a 2-D array"), std::string::npos);
  EXPECT_NE(order_error({4, 256}, std::vector<int64_t>(ok.begin(), ok.begin() + 1000)).find("sampler.order"),
            std::string::npos);  // truncated: the npy reader's message, with the key
  // No rows at all (shape [0, 256]): refused, and no memcpy from the empty array's null data
  // (found by fuzz_order; the sanitizer build's UBSan checks it).
  EXPECT_NE(order_error({0, 256}, {}).find("has 0 rows but epochs=4"), std::string::npos);
  // Rows need not be permutations: indices in range may repeat.
  std::vector<int64_t> repeats(4 * 256, 7);
  EXPECT_EQ(order_error({4, 256}, repeats), "(no error)");
}

}  // namespace
}  // namespace mpiddp::train
