#include "mpiddp/analysis/compare.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "mpiddp/analysis/compare_report.hpp"

namespace mpiddp::analysis {
namespace {

using io::Json;
using io::RunLog;

// A finished run of 2 epochs x 2 steps with the given world size and losses.
RunLog make_log(int world_size, double scale = 1.0, const std::string& dtype = "float32") {
  RunLog log;
  log.path = "np" + std::to_string(world_size) + ".jsonl";
  log.world_size = world_size;
  log.config = {{"seed", 0},
                {"dtype", dtype},
                {"optimizer", {{"type", "sgd"}, {"lr", 0.03}}},
                {"batch", {{"global", 64}}},
                {"log", {{"path", log.path}, {"every_steps", 1}}},
                {"check_every_steps", 0}};
  log.steps = {{1, 1, 2.0 * scale, 0.03}, {1, 2, 1.0 * scale, 0.03},
               {2, 3, 0.5 * scale, 0.03}, {2, 4, 0.25 * scale, 0.03}};
  log.epochs = {{1, 0.8 * scale, {}}, {2, 0.2 * scale, {}}};
  log.end = io::EndRecord{4, "abc", true, 0.0};
  return log;
}

Comparison compare(const RunLog& a, const RunLog& b, Metric m = Metric::kAll) {
  return compare_runs(a, b, m, default_tolerance(a.dtype()), true);
}

TEST(Compare, DefaultToleranceIsLooserForFloat32) {
  const Tolerance f32 = default_tolerance("float32"), f64 = default_tolerance("float64");
  EXPECT_EQ(f32.rtol, 1e-4);
  EXPECT_EQ(f32.atol, 1e-7);
  EXPECT_EQ(f64.rtol, 1e-12);
  EXPECT_EQ(f64.atol, 1e-15);
  EXPECT_GT(f32.rtol, f64.rtol);
  EXPECT_GT(f32.atol, f64.atol);
}

TEST(Compare, IdenticalLogsPassWithZeroDifferences) {
  const Comparison c = compare(make_log(1), make_log(2));
  EXPECT_EQ(c.exit_code(), kCompareWithin);
  // 2 eval_loss + 4 step losses, all equal.
  ASSERT_EQ(c.values.size(), 6u);
  EXPECT_EQ(c.outside(), 0);
  for (const auto& m : c.metrics) EXPECT_EQ(m.max_abs_diff, 0.0) << m.metric;
  EXPECT_EQ(c.verdict().rfind("PASS", 0), 0u) << c.verdict();
}

TEST(Compare, WithinAndOutsideTheFloat32Tolerance) {
  // Scale every value by (1 + 5e-5): rel diff 5e-5 < rtol 1e-4 passes.
  const Comparison near = compare(make_log(1), make_log(2, 1.0 + 5e-5));
  EXPECT_EQ(near.exit_code(), kCompareWithin);
  // The largest abs diff is step 1's: 2.0 * 5e-5 = 1e-4; rel diff is 5e-5 everywhere.
  const MetricSummary& loss = near.metrics.back();
  EXPECT_EQ(loss.metric, "loss");
  EXPECT_NEAR(loss.max_abs_diff, 1e-4, 1e-12);
  EXPECT_NEAR(loss.max_rel_diff, 5e-5, 1e-12);
  EXPECT_EQ(near.values[loss.worst].step, 1);

  // (1 + 2e-4): every value is outside, 2 eval_loss and 4 step losses.
  const Comparison far = compare(make_log(1), make_log(2, 1.0 + 2e-4));
  EXPECT_EQ(far.exit_code(), kCompareOutside);
  EXPECT_EQ(far.outside(), 6);
  EXPECT_EQ(far.verdict().rfind("FAIL: 6 of 6", 0), 0u) << far.verdict();
  // --metric eval_loss compares only the 2 epoch values.
  const Comparison eval_only = compare(make_log(1), make_log(2, 1.0 + 2e-4), Metric::kEvalLoss);
  EXPECT_EQ(eval_only.values.size(), 2u);
  EXPECT_EQ(eval_only.outside(), 2);
}

TEST(Compare, Float64DefaultsCatchWhatFloat32Allows) {
  // 1e-9 relative is float32 noise but far too much for float64.
  EXPECT_EQ(compare(make_log(1, 1.0, "float32"), make_log(2, 1.0 + 1e-9, "float32")).exit_code(),
            kCompareWithin);
  EXPECT_EQ(compare(make_log(1, 1.0, "float64"), make_log(2, 1.0 + 1e-9, "float64")).exit_code(),
            kCompareOutside);
}

TEST(Compare, AtolCoversValuesNearZero) {
  RunLog a = make_log(1), b = make_log(2);
  a.epochs[1].eval_loss = 0.0;
  b.epochs[1].eval_loss = 5e-8;  // rel diff infinite, but 5e-8 <= atol 1e-7
  const Comparison c = compare(a, b, Metric::kEvalLoss);
  EXPECT_TRUE(c.values[1].ok);
  EXPECT_TRUE(std::isinf(c.values[1].rel_diff));
  b.epochs[1].eval_loss = 2e-7;
  EXPECT_FALSE(compare(a, b, Metric::kEvalLoss).values[1].ok);
}

TEST(Compare, NonFiniteValues) {
  RunLog a = make_log(1), b = make_log(2);
  a.steps[2].loss = b.steps[2].loss = NAN;  // the same failure in both: not a difference
  EXPECT_EQ(compare(a, b).exit_code(), kCompareWithin);
  b.steps[3].loss = INFINITY;  // finite in one run only: infinitely far off
  const Comparison c = compare(a, b);
  EXPECT_EQ(c.exit_code(), kCompareOutside);
  EXPECT_TRUE(std::isinf(c.metrics.back().max_abs_diff));
  EXPECT_EQ(c.values[c.metrics.back().worst].step, 4);
}

TEST(Compare, RunWithDifferingReplicasFails) {
  RunLog run = make_log(2);
  run.end->replicas_identical = false;
  const Comparison c = compare(make_log(1), run);
  EXPECT_EQ(c.outside(), 0);
  EXPECT_EQ(c.exit_code(), kCompareOutside);
  EXPECT_NE(c.verdict().find("the run's replicas were not identical"), std::string::npos);
}

TEST(Compare, ConfigDifferencesNameTheKeys) {
  RunLog a = make_log(1), b = make_log(2);
  // log.path, log.every_steps and check_every_steps may differ; world_size is not config.
  b.config["log"]["every_steps"] = 2;
  b.config["check_every_steps"] = 5;
  // nor the memory a rank may hold (memory.limit_mb), nor reduce.shard's mode
  b.config["memory"] = {{"limit_mb", 9000}};
  b.config["reduce"] = {{"shard", "optimizer"}};
  EXPECT_TRUE(config_differences(a, b).empty());

  b.config["optimizer"]["lr"] = 0.1;
  b.config["epochs"] = 3;
  const auto d = config_differences(a, b);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].describe(), "epochs (absent vs 3)");
  EXPECT_EQ(d[1].describe(), "optimizer.lr (0.03 vs 0.1)");
  try {
    compare(a, b);
    FAIL() << "no Incomparable";
  } catch (const Incomparable& e) {
    EXPECT_EQ(e.differing_keys, (std::vector<std::string>{"epochs", "optimizer.lr"}));
    EXPECT_NE(std::string(e.what()).find("optimizer.lr (0.03 vs 0.1)"), std::string::npos);
  }
}

TEST(Compare, SamePerRankBatchAtTwoWorldSizesIsADifferentExperiment) {
  RunLog a = make_log(1), b = make_log(2);
  a.config["batch"] = b.config["batch"] = {{"per_rank", 32}};
  const auto d = config_differences(a, b);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].describe(), "batch.per_rank (global batch 32 vs global batch 64)");
}

void expect_incomparable(const RunLog& a, const RunLog& b, const std::string& fragment,
                         Metric m = Metric::kAll) {
  try {
    compare(a, b, m);
    FAIL() << "no Incomparable, expected: " << fragment;
  } catch (const Incomparable& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(Compare, LogsThatCannotBeCompared) {
  RunLog short_run = make_log(2);
  short_run.epochs.pop_back();
  expect_incomparable(make_log(1), short_run, "different number of epochs: the baseline has 2, the run 1");
  RunLog unfinished = make_log(2);
  unfinished.end.reset();
  expect_incomparable(make_log(1), unfinished, "has no end record");
  RunLog more_steps = make_log(2);
  more_steps.end->steps = 5;
  expect_incomparable(make_log(1), more_steps, "different number of steps");
  expect_incomparable(make_log(1), make_log(2), "no eval_accuracy", Metric::kEvalAccuracy);
  RunLog no_steps = make_log(2);
  no_steps.steps.clear();
  expect_incomparable(make_log(1), no_steps, "no step record is in both logs", Metric::kLoss);
}

TEST(Compare, ParseMetric) {
  EXPECT_EQ(parse_metric("loss"), Metric::kLoss);
  EXPECT_EQ(parse_metric("eval_accuracy"), Metric::kEvalAccuracy);
  EXPECT_THROW(parse_metric("accuracy"), std::invalid_argument);
}

TEST(CompareReport, HeaderNamesLauncherAndDistinctHosts) {
  RunLog a = make_log(1), b = make_log(8);
  b.launcher = "srun";
  b.hosts = {"n1", "n1", "n2", "n2", "n3", "n4", "n5", "n5"};
  const std::string text = comparison_text(a, b, compare(a, b), Metric::kAll);
  EXPECT_NE(text.find("run:      np8.jsonl (world_size 8, float32, launched by srun on n1, n2, n3 "
                      "and 2 more hosts)\n"),
            std::string::npos)
      << text;
}

TEST(CompareReport, JsonParsesWithTheFigures) {
  const RunLog a = make_log(1), b = make_log(2, 1.0 + 2e-4);
  const Comparison c = compare(a, b);
  const Json j = Json::parse(comparison_json(a, b, c));
  EXPECT_EQ(j["verdict"], "fail");
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["rtol"], 1e-4);
  EXPECT_EQ(j["metrics"]["eval_loss"]["compared"], 2);
  EXPECT_EQ(j["metrics"]["loss"]["outside"], 4);
  EXPECT_EQ(j["metrics"]["loss"]["worst_step"], 1);
  EXPECT_NEAR(j["metrics"]["loss"]["max_abs_diff"].get<double>(), 4e-4, 1e-12);
  EXPECT_EQ(j["replicas_identical"]["run"], true);
  EXPECT_EQ(j["run"]["world_size"], 2);
  EXPECT_EQ(j["values"].size(), 6u);

  const Json k = Json::parse(incomparable_json("why", {"optimizer.lr"}));
  EXPECT_EQ(k["verdict"], "incomparable");
  EXPECT_EQ(k["exit_code"], 2);
  EXPECT_EQ(k["differing_keys"][0], "optimizer.lr");
}

TEST(CompareReport, TableHasOneRowPerEpochMetricAndTheWorstStep) {
  const RunLog a = make_log(1), b = make_log(2, 1.0 + 2e-4);
  const std::string text = comparison_text(a, b, compare(a, b), Metric::kAll);
  // Epoch 1: eval_loss, then its worst step (step 1: 2.0 vs 2.0004).
  EXPECT_NE(text.find("    1       -  eval_loss"), std::string::npos) << text;
  EXPECT_NE(text.find("    1       1  loss (worst)"), std::string::npos) << text;
  EXPECT_NE(text.find("    2       3  loss (worst)"), std::string::npos) << text;
  EXPECT_NE(text.find("replicas_identical: baseline true, run true"), std::string::npos);
  EXPECT_NE(text.find("run:      np2.jsonl (world_size 2, float32)\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nFAIL: 6 of 6"), std::string::npos);
  const std::string steps = comparison_text(a, b, compare(a, b, Metric::kLoss), Metric::kLoss);
  EXPECT_NE(steps.find("    2       4  loss  "), std::string::npos) << steps;
}

}  // namespace
}  // namespace mpiddp::analysis
