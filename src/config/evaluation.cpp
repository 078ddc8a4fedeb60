#include "mpiddp/config/evaluation.hpp"

#include <limits>

namespace mpiddp::config {

const std::vector<std::string>& evaluation_metrics() {
  static const std::vector<std::string> metrics = {"eval_loss", "eval_accuracy", "eval_loss_ema"};
  return metrics;
}

bool larger_is_better(const std::string& metric) { return metric == "eval_accuracy"; }

void parse_evaluation_keys(io::JsonSection& root, EvaluationConfig& eval, EarlyStoppingConfig& early_stopping) {
  if (root.has("eval")) {
    auto section = root.section("eval");
    eval.every_steps = section.integer("every_steps", 0, 0, io::kMaxConfigCount);
    eval.max_samples = section.integer("max_samples", 0, 0, io::kMaxConfigCount);
    section.finish();
  }
  if (root.has("early_stopping")) {
    auto section = root.section("early_stopping");
    early_stopping.metric = section.choice("metric", "eval_loss", evaluation_metrics());
    early_stopping.patience = section.integer("patience", 3, 1, io::kMaxConfigCount);
    early_stopping.min_delta = section.number("min_delta", 0.0, 0.0, std::numeric_limits<double>::max());
    section.finish();
  }
}

}  // namespace mpiddp::config
