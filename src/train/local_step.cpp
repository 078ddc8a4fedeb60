// The step with sync off (include/mpiddp/train/local_step.hpp).
#include "mpiddp/train/local_step.hpp"

#include <cmath>
#include <limits>

#include "mpiddp/core/finite.hpp"

namespace mpiddp::train {

template <typename T>
LocalStep<T>::LocalStep(const StepParts<T>& parts) : MicroBatchStep<T>(parts, 1) {
  // BatchNorm normalises over the rank's own samples: nothing is shared.
  this->pipeline_.training_pass().statistics = nullptr;
}

template <typename T>
StepOutcome LocalStep<T>::reduce(double local_loss) {
  // A rank whose gradients are not finite sends NaN, so the decision below is still the
  // same on every rank.
  StepOutcome outcome;
  outcome.locally_finite = std::isfinite(local_loss) &&
                           all_finite(this->model_.gradients(), this->model_.parameter_count());
  // The stop vote rides with the loss (Note [stopping on a signal]).
  double sums[2] = {outcome.locally_finite ? local_loss : std::numeric_limits<double>::quiet_NaN(),
                    stop_vote()};
  this->parts_.comm.allreduce_sum(sums, 2);
  this->pipeline_.phases().lap(record::SpanKind::kReductionWait);  // the trace's wait; the profile's sync stays 0
  outcome.stop_requested = sums[1] > 0.0;
  outcome.loss = sums[0] / this->parts_.comm.size();
  outcome.finite = std::isfinite(outcome.loss);
  return outcome;
}

template class LocalStep<float>;
template class LocalStep<double>;

}  // namespace mpiddp::train
