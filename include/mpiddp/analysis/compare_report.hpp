#pragma once
// What `mpiddp compare` prints: a readable table, or one JSON object for scripts.
#include <string>
#include <vector>

#include "mpiddp/analysis/compare.hpp"

namespace mpiddp::analysis {

// The table (epoch, step, metric, baseline, run, abs diff, rel diff, ok), the largest
// differences per metric, both runs' replicas_identical flags and the verdict line.
// With Metric::kAll, step losses are summarised by the worst step of each epoch; with
// Metric::kLoss every step gets a row.
std::string comparison_text(const io::RunLog& baseline, const io::RunLog& run,
                            const Comparison& comparison, Metric metric);

// {"verdict":"pass"|"fail", "exit_code":0|1, "rtol", "atol", "metrics":{NAME:{compared,
// outside, max_abs_diff, max_rel_diff, worst_epoch, worst_step}}, "replicas_identical":
// {"baseline","run"}, "baseline":{path,world_size,dtype}, "run":{...}, "values":[...]}
std::string comparison_json(const io::RunLog& baseline, const io::RunLog& run,
                            const Comparison& comparison);

// {"verdict":"incomparable", "exit_code":2, "reason":..., "differing_keys":[...]}
std::string incomparable_json(const std::string& reason, const std::vector<std::string>& keys);

}  // namespace mpiddp::analysis
