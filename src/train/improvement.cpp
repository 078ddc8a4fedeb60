#include "mpiddp/train/improvement.hpp"

#include <cmath>
#include <utility>

#include "mpiddp/config/evaluation.hpp"

namespace mpiddp::train {

ImprovementTracker::ImprovementTracker(std::string metric, double min_delta)
    : metric_(std::move(metric)), min_delta_(min_delta), larger_is_better_(config::larger_is_better(metric_)) {}

bool ImprovementTracker::observe(double value, int64_t step) {
  const bool improved = !std::isnan(value) &&
                        (!best_ || (larger_is_better_ ? value > *best_ + min_delta_ : value < *best_ - min_delta_));
  if (improved) {
    best_ = value;
    best_step_ = step;
    since_best_ = 0;
  } else {
    ++since_best_;
  }
  return improved;
}

io::Json ImprovementTracker::state() const {
  return {{"metric", metric_},
          {"best", best_ ? io::Json(*best_) : io::Json(nullptr)},
          {"best_step", best_step_},
          {"since_best", since_best_}};
}

void ImprovementTracker::restore(const io::Json& state) {
  // The checkpoint's data checksum does not cover its metadata: a field of another type is
  // taken as no state, never a crash.
  if (!state.is_object() || !state.contains("metric") || state["metric"] != metric_) return;
  const auto integer = [&](const char* key) {
    const auto it = state.find(key);
    return it != state.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t{-1};
  };
  if (integer("best_step") < -1 || integer("since_best") < 0) return;
  const auto best = state.find("best");
  best_ = best != state.end() && best->is_number() ? std::optional<double>(best->get<double>()) : std::nullopt;
  best_step_ = integer("best_step");
  since_best_ = integer("since_best");
}

}  // namespace mpiddp::train
