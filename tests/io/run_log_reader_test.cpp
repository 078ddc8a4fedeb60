#include "mpiddp/io/run_log_reader.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "../support/text_files.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::io {
namespace {

using test::write_temp;

const char* kLog =
    R"({"kind":"run","world_size":2,"launcher":"mpirun","hosts":["a","b"],"config":{"dtype":"float64","loss":"mse"},"version":"0.1.0"})"
    "\n"
    R"({"kind":"step","epoch":1,"step":1,"loss":0.5,"lr":0.03})"
    "\n\n"  // a blank line is allowed
    R"({"kind":"step","epoch":1,"step":2,"loss":null,"lr":0.03})"
    "\n"
    R"({"kind":"checkpoint","step":2})"  // an unknown kind: skipped
    "\n"
    R"({"kind":"epoch","epoch":1,"eval_loss":0.25,"eval_accuracy":0.75,"time_s":1,"samples_per_s":2})"
    "\n"
    R"({"kind":"end","steps":2,"param_checksum":"00ff","replicas_identical":true,"max_replica_diff":0,"time_s":1})"
    "\n";

TEST(RunLog, ReadsEveryRecordKind) {
  const RunLog log = read_run_log(write_temp("run_log_ok.jsonl", kLog));
  EXPECT_EQ(log.world_size, 2);
  EXPECT_EQ(log.dtype(), "float64");
  EXPECT_EQ(log.launcher, "mpirun");
  EXPECT_EQ(log.hosts, (std::vector<std::string>{"a", "b"}));
  ASSERT_EQ(log.steps.size(), 2u);
  EXPECT_EQ(log.steps[0].step, 1);
  EXPECT_EQ(log.steps[0].loss, 0.5);
  EXPECT_TRUE(std::isnan(log.steps[1].loss));  // null is how JSON carries a NaN loss
  ASSERT_EQ(log.epochs.size(), 1u);
  EXPECT_EQ(log.epochs[0].eval_loss, 0.25);
  EXPECT_EQ(log.epochs[0].eval_accuracy, 0.75);
  ASSERT_TRUE(log.end.has_value());
  EXPECT_EQ(log.end->steps, 2);
  EXPECT_TRUE(log.end->replicas_identical);
  EXPECT_EQ(log.end->param_checksum, "00ff");
}

void expect_data_error(const std::string& path, const std::string& fragment) {
  try {
    read_run_log(path);
    FAIL() << "no error for " << path;
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), kExitData);
  }
}

TEST(RunLog, ErrorsNameTheFileAndLine) {
  expect_data_error(::testing::TempDir() + "no_such_log.jsonl", "cannot open the run log");
  expect_data_error(write_temp("empty.jsonl", ""), "is empty");
  expect_data_error(write_temp("csv.jsonl", "epoch,loss\n1,0.5\n"), "csv.jsonl:1: not an mpiddp run log");
  expect_data_error(write_temp("no_run.jsonl", R"({"kind":"step","epoch":1,"step":1,"loss":1,"lr":1})"),
                    "first record should be");
  expect_data_error(
      write_temp("bad_step.jsonl", std::string(kLog) + R"({"kind":"step","epoch":1,"loss":1,"lr":1})" + "\n"),
      "bad_step.jsonl:8: step record has no \"step\"");
  expect_data_error(write_temp("two_runs.jsonl", std::string(kLog) + kLog), "a second run record");
}

}  // namespace
}  // namespace mpiddp::io
