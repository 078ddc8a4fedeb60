#pragma once
// Whether an evaluation improved on the best one so far: what checkpoint.keep_best keeps and
// what early stopping counts. Every rank feeds it the same values (rank 0's, broadcast:
// Note [deciding together] in evaluator.cpp), so every rank reaches the same verdict
// at the same evaluation, and no rank skips a collective that another enters.
#include <cstdint>
#include <optional>
#include <string>

#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::train {

class ImprovementTracker {
 public:
  // metric: a name of config::evaluation_metrics(); an improvement must beat the best by
  // more than min_delta (in the metric's better direction).
  ImprovementTracker(std::string metric, double min_delta);

  // Takes the evaluation at `step`; returns whether it is the new best. The first finite
  // value always is; a NaN never is.
  bool observe(double value, int64_t step);

  const std::string& metric() const { return metric_; }
  std::optional<double> best() const { return best_; }
  int64_t best_step() const { return best_step_; }
  int64_t evaluations_since_best() const { return since_best_; }

  // {"metric", "best", "best_step", "since_best"} for a checkpoint, and back: a resumed run
  // keeps and stops as the uninterrupted one would. restore ignores another metric's state.
  io::Json state() const;
  void restore(const io::Json& state);

 private:
  std::string metric_;
  double min_delta_;
  bool larger_is_better_;
  std::optional<double> best_;
  int64_t best_step_ = -1;
  int64_t since_best_ = 0;
};

}  // namespace mpiddp::train
