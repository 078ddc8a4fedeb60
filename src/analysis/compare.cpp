#include "mpiddp/analysis/compare.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

namespace mpiddp::analysis {

using io::Json;
using io::RunLog;

namespace {

// Keys that change where output goes or how often things are checked, never the numbers.
// Keys that say where output goes, how the run is watched, or how the work is spread over
// cores and ranks: they may differ between a baseline and a run without making them
// incomparable (the world size itself is not part of the config).
const char* const kIgnoredKeys[] = {"log",      "check_every_steps", "checkpoint", "save_weights",
                                    "watchdog", "on_nonfinite",      "max_skipped", "divergence",
                                    "threads",  "prefetch",          "reduce",      "deterministic",
                                    "compute.isa",  "compute.precision", "memory"};

bool ignored(const std::string& path) {
  for (const char* key : kIgnoredKeys) {
    const std::string prefix = key;
    if (path == prefix || path.rfind(prefix + ".", 0) == 0) return true;
  }
  return false;
}

// {"a":{"b":1},"c":[x,y]} -> {"a.b": 1, "c[0]": x, "c[1]": y}
void flatten(const Json& node, const std::string& path, std::map<std::string, Json>& out) {
  if (node.is_object() && !node.empty()) {
    for (auto it = node.begin(); it != node.end(); ++it)
      flatten(it.value(), path.empty() ? it.key() : path + "." + it.key(), out);
  } else if (node.is_array() && !node.empty()) {
    for (size_t i = 0; i < node.size(); ++i) flatten(node[i], path + "[" + std::to_string(i) + "]", out);
  } else {
    out[path] = node;
  }
}

int64_t global_batch(const RunLog& log) {
  const Json batch = log.config.value("batch", Json::object());
  if (batch.contains("global") && batch["global"].is_number_integer())
    return batch["global"].get<int64_t>();
  if (batch.contains("per_rank") && batch["per_rank"].is_number_integer())
    return batch["per_rank"].get<int64_t>() * log.world_size;
  return 0;
}

ComparedValue compare_value(const std::string& metric, int64_t epoch, int64_t step, double base,
                            double run, const Tolerance& tol) {
  ComparedValue v{metric, epoch, step, base, run, 0.0, 0.0, true};
  // Identical values pass even when not finite (both NaN: the same failure in both runs);
  // a value that is finite in one run only is infinitely far off, which keeps the
  // differences ordered for "largest difference" below.
  if (base == run || (std::isnan(base) && std::isnan(run))) return v;
  v.abs_diff = std::isfinite(base) && std::isfinite(run) ? std::fabs(run - base) : INFINITY;
  v.rel_diff = v.abs_diff / std::fabs(base);  // inf when the baseline is 0
  v.ok = v.abs_diff <= tol.atol + tol.rtol * std::fabs(base);
  return v;
}

std::string format_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

std::string describe_location(const ComparedValue& v) {
  return v.step > 0 ? "step " + std::to_string(v.step) : "epoch " + std::to_string(v.epoch);
}

void summarize(Comparison& c, const std::string& metric) {
  MetricSummary s;
  s.metric = metric;
  for (size_t i = 0; i < c.values.size(); ++i) {
    const ComparedValue& v = c.values[i];
    if (v.metric != metric) continue;
    ++s.compared;
    if (!v.ok) ++s.outside;
    if (s.compared == 1 || v.abs_diff > c.values[s.worst].abs_diff) s.worst = i;
    s.max_abs_diff = std::max(s.max_abs_diff, v.abs_diff);
    s.max_rel_diff = std::max(s.max_rel_diff, v.rel_diff);
  }
  if (s.compared > 0) c.metrics.push_back(s);
}

void compare_epochs(const RunLog& baseline, const RunLog& run, Metric metric, Comparison& c) {
  const bool want_loss = metric == Metric::kEvalLoss || metric == Metric::kAll;
  const bool want_accuracy = metric == Metric::kEvalAccuracy || metric == Metric::kAll;
  for (size_t i = 0; i < baseline.epochs.size(); ++i) {
    const io::EpochRecord& b = baseline.epochs[i];
    const io::EpochRecord& r = run.epochs[i];
    if (b.epoch != r.epoch)
      throw Incomparable("epoch records out of step: record " + std::to_string(i + 1) + " is epoch " +
                         std::to_string(b.epoch) + " in the baseline but epoch " +
                         std::to_string(r.epoch) + " in the run");
    if (want_loss) c.values.push_back(compare_value("eval_loss", b.epoch, 0, b.eval_loss, r.eval_loss, c.tolerance));
    if (want_accuracy && b.eval_accuracy && r.eval_accuracy)
      c.values.push_back(compare_value("eval_accuracy", b.epoch, 0, *b.eval_accuracy,
                                       *r.eval_accuracy, c.tolerance));
    else if (want_accuracy && (b.eval_accuracy.has_value() != r.eval_accuracy.has_value()))
      throw Incomparable("epoch " + std::to_string(b.epoch) + " has eval_accuracy in only one of the logs");
  }
}

void compare_steps(const RunLog& baseline, const RunLog& run, Comparison& c) {
  // Step records are matched by step number: with different log.every_steps only the
  // steps logged by both are compared.
  std::map<int64_t, const io::StepRecord*> by_step;
  for (const auto& s : run.steps) by_step[s.step] = &s;
  for (const auto& b : baseline.steps) {
    const auto it = by_step.find(b.step);
    if (it == by_step.end()) continue;
    c.values.push_back(compare_value("loss", b.epoch, b.step, b.loss, it->second->loss, c.tolerance));
  }
}

}  // namespace

Tolerance default_tolerance(const std::string& dtype) {
  if (dtype == "float64") return {1e-12, 1e-15};
  return {1e-4, 1e-7};
}

namespace {

// The products' precision the defaults follow: the baseline's when it is not float32, else the run's.
std::string products_precision(const RunLog& baseline, const RunLog& run) {
  return baseline.precision() != "float32" ? baseline.precision() : run.precision();
}

}  // namespace

Tolerance default_tolerance(const RunLog& baseline, const RunLog& run) {
  if (products_precision(baseline, run) != "float32") return kBf16Tolerance;
  return default_tolerance(baseline.dtype());
}

std::string default_tolerance_name(const RunLog& baseline, const RunLog& run) {
  const std::string precision = products_precision(baseline, run);
  if (precision == "float32") return baseline.dtype();
  return baseline.dtype() + " with " + precision + " products";
}

Metric parse_metric(const std::string& name) {
  if (name == "eval_loss") return Metric::kEvalLoss;
  if (name == "loss") return Metric::kLoss;
  if (name == "eval_accuracy") return Metric::kEvalAccuracy;
  if (name == "all") return Metric::kAll;
  throw std::invalid_argument("--metric: unknown metric '" + name +
                              "'; expected eval_loss, loss, eval_accuracy or all");
}

std::string ConfigDifference::describe() const {
  return key + " (" + baseline + " vs " + run + ")";
}

std::vector<ConfigDifference> config_differences(const RunLog& baseline, const RunLog& run) {
  std::map<std::string, Json> a, b;
  flatten(baseline.config, "", a);
  flatten(run.config, "", b);
  std::vector<ConfigDifference> differences;  // a std::map walk: sorted by key
  for (const auto& [key, value] : a) {
    if (ignored(key)) continue;
    const auto it = b.find(key);
    if (it == b.end()) differences.push_back({key, value.dump(), "absent"});
    else if (it->second != value) differences.push_back({key, value.dump(), it->second.dump()});
  }
  for (const auto& [key, value] : b)
    if (!ignored(key) && !a.count(key)) differences.push_back({key, "absent", value.dump()});
  std::sort(differences.begin(), differences.end(),
            [](const auto& x, const auto& y) { return x.key < y.key; });
  const int64_t gb = global_batch(baseline), gr = global_batch(run);
  if (differences.empty() && gb != gr)
    differences.push_back({"batch.per_rank", "global batch " + std::to_string(gb),
                           "global batch " + std::to_string(gr)});
  return differences;
}

int64_t Comparison::outside() const {
  int64_t n = 0;
  for (const auto& m : metrics) n += m.outside;
  return n;
}

int Comparison::exit_code() const {
  return outside() == 0 && baseline_replicas_identical && run_replicas_identical ? kCompareWithin
                                                                                  : kCompareOutside;
}

std::string Comparison::verdict() const {
  int64_t compared = 0;
  for (const auto& m : metrics) compared += m.compared;
  if (exit_code() == kCompareWithin)
    return "PASS: all " + std::to_string(compared) + " compared values are within tolerance "
           "and both runs' replicas are identical";
  std::string text = "FAIL: ";
  if (outside() > 0) {
    const MetricSummary* worst = nullptr;
    for (const auto& m : metrics)
      if (m.outside > 0 && (!worst || m.max_rel_diff > worst->max_rel_diff)) worst = &m;
    const ComparedValue& v = values[worst->worst];
    text += std::to_string(outside()) + " of " + std::to_string(compared) +
            " compared values are outside tolerance (largest: " + v.metric + " at " +
            describe_location(v) + ", abs diff " + format_number(v.abs_diff) + ", rel diff " +
            format_number(v.rel_diff) + ")";
  }
  for (const auto& [identical, who] : {std::pair{baseline_replicas_identical, "baseline"},
                                       std::pair{run_replicas_identical, "run"}})
    if (!identical)
      text += std::string(text.size() > 6 ? "; " : "") + "the " + who +
              "'s replicas were not identical at the end";
  return text;
}

Comparison compare_runs(const RunLog& baseline, const RunLog& run, Metric metric,
                        Tolerance tolerance, bool tolerance_is_default) {
  if (const auto differences = config_differences(baseline, run); !differences.empty()) {
    std::string list;
    std::vector<std::string> keys;
    for (const auto& d : differences) {
      list += (list.empty() ? "" : ", ") + d.describe();
      keys.push_back(d.key);
    }
    throw Incomparable("the configs differ in keys that change the numbers: " + list +
                           " (world_size and log.path may differ)",
                       keys);
  }
  for (const RunLog* log : {&baseline, &run})
    if (!log->end)
      throw Incomparable("'" + log->path + "' has no end record: the run did not finish");
  if (baseline.epochs.size() != run.epochs.size())
    throw Incomparable("different number of epochs: the baseline has " +
                       std::to_string(baseline.epochs.size()) + ", the run " +
                       std::to_string(run.epochs.size()));
  if (baseline.end->steps != run.end->steps)
    throw Incomparable("different number of steps: the baseline took " +
                       std::to_string(baseline.end->steps) + ", the run " +
                       std::to_string(run.end->steps) +
                       " (does the sampler pad differently at this world size?)");

  Comparison c;
  c.tolerance = tolerance;
  c.tolerance_is_default = tolerance_is_default;
  c.baseline_replicas_identical = baseline.end->replicas_identical;
  c.run_replicas_identical = run.end->replicas_identical;
  compare_epochs(baseline, run, metric, c);
  if (metric == Metric::kLoss || metric == Metric::kAll) compare_steps(baseline, run, c);
  for (const char* name : {"eval_loss", "eval_accuracy", "loss"}) summarize(c, name);
  if (c.metrics.empty()) {
    const char* what = metric == Metric::kLoss ? "no step record is in both logs"
                       : metric == Metric::kEvalAccuracy
                           ? "the logs have no eval_accuracy (a regression run?)"
                           : "the logs have no epoch or step records";
    throw Incomparable(std::string("nothing to compare: ") + what);
  }
  return c;
}

}  // namespace mpiddp::analysis
