#pragma once
// Compares a run's log with a baseline's (normally the np=1 run of the same config):
// epoch records by epoch, step records by step, each value against a tolerance.
// docs/compare.md explains the default tolerances.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "mpiddp/io/run_log_reader.hpp"

namespace mpiddp::analysis {

// The exit codes of `mpiddp compare` (its own, not the trainer's).
enum CompareExit : int {
  kCompareWithin = 0,        // every compared value within tolerance
  kCompareOutside = 1,       // some value outside tolerance, or a run's replicas differ
  kCompareIncomparable = 2,  // the logs cannot be compared (or bad command line)
};

// A value passes when |run - baseline| <= atol + rtol * |baseline|.
struct Tolerance {
  double rtol = 0.0;
  double atol = 0.0;
};

// Defaults from the runs' dtype: float32 1e-4 / 1e-7, float64 1e-12 / 1e-15. See
// docs/compare.md for why (a few thousand ulps of headroom over measured differences).
Tolerance default_tolerance(const std::string& dtype);
// The defaults for two runs: their dtype's, or bf16's when either computed its products in
// bf16 or bf16_reference (compute.precision), whose rounding (2^-8 per operand) shows in the
// losses far above float32's; docs/compare.md gives the measured differences behind it.
inline constexpr Tolerance kBf16Tolerance{1e-2, 1e-5};
Tolerance default_tolerance(const io::RunLog& baseline, const io::RunLog& run);
// What those defaults are for: "float32", or "float32 with bf16 products".
std::string default_tolerance_name(const io::RunLog& baseline, const io::RunLog& run);

enum class Metric { kEvalLoss, kLoss, kEvalAccuracy, kAll };
// "eval_loss" | "loss" | "eval_accuracy" | "all"; throws std::invalid_argument otherwise.
Metric parse_metric(const std::string& name);

// The logs cannot be compared; the message says why (and differing_keys which keys).
class Incomparable : public std::runtime_error {
 public:
  explicit Incomparable(const std::string& why, std::vector<std::string> keys = {})
      : std::runtime_error(why), differing_keys(std::move(keys)) {}
  std::vector<std::string> differing_keys;
};

struct ConfigDifference {
  std::string key;               // "optimizer.lr"
  std::string baseline, run;     // the values as JSON text, or "absent"
  std::string describe() const;  // "optimizer.lr (0.03 vs 0.1)"
};

// Resolved-config keys whose values differ between the two runs in ways that change the
// numbers, sorted by key. Keys that only say where output
// goes or how often things are checked (log.*, check_every_steps) are ignored, and so is
// the world size, which is not a config key. The effective global batch is compared too:
// the same batch.per_rank at two world sizes is two different experiments.
std::vector<ConfigDifference> config_differences(const io::RunLog& baseline, const io::RunLog& run);

struct ComparedValue {
  std::string metric;  // "eval_loss", "loss", "eval_accuracy"
  int64_t epoch = 0;
  int64_t step = 0;    // 0 for per-epoch metrics
  double baseline = 0.0, run = 0.0;
  double abs_diff = 0.0, rel_diff = 0.0;  // rel_diff = abs_diff / |baseline|
  bool ok = false;
};

struct MetricSummary {
  std::string metric;
  int64_t compared = 0, outside = 0;
  double max_abs_diff = 0.0, max_rel_diff = 0.0;
  size_t worst = 0;  // index into Comparison::values of the largest abs_diff
};

struct Comparison {
  Tolerance tolerance;
  bool tolerance_is_default = true;  // no --rtol or --atol given
  std::vector<ComparedValue> values;  // epoch metrics in epoch order, then step losses
  std::vector<MetricSummary> metrics;
  bool baseline_replicas_identical = false, run_replicas_identical = false;

  int64_t outside() const;
  // kCompareWithin or kCompareOutside.
  int exit_code() const;
  // One line: "PASS: ..." or "FAIL: ...".
  std::string verdict() const;
};

// Throws Incomparable when the logs differ in config, epochs or steps, lack an end record,
// or hold none of the requested metric.
Comparison compare_runs(const io::RunLog& baseline, const io::RunLog& run, Metric metric,
                        Tolerance tolerance, bool tolerance_is_default);

}  // namespace mpiddp::analysis
