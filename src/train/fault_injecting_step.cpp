// The faults of debug.* between a step's parts (include/mpiddp/train/fault_injecting_step.hpp).
#include "mpiddp/train/fault_injecting_step.hpp"

#include <utility>

#include "mpiddp/train/fault_injection.hpp"

namespace mpiddp::train {

template <typename T>
FaultInjectingStep<T>::FaultInjectingStep(std::unique_ptr<StepStrategy<T>> inner, const StepParts<T>& parts)
    : inner_(std::move(inner)), faults_(parts.config.faults.inject), comm_(parts.comm), pipeline_(parts.pipeline) {}

template <typename T>
double FaultInjectingStep<T>::compute_gradients(const Index* samples, Index count) {
  const double local_loss = inner_->compute_gradients(samples, count);
  inject_step_fault(faults_, comm_.rank(), step(), pipeline_.model().gradients());
  inject_collective_fault(faults_, comm_, step());
  return local_loss;
}

template <typename T>
double FaultInjectingStep<T>::update(double lr) {
  const double grad_norm = inner_->update(lr);
  inject_update_fault(faults_, comm_.rank(), step(), pipeline_.model().parameters());
  return grad_norm;
}

template class FaultInjectingStep<float>;
template class FaultInjectingStep<double>;

}  // namespace mpiddp::train
