// What the steps with sync on share (include/mpiddp/train/synchronized_step.hpp).
#include "mpiddp/train/synchronized_step.hpp"

#include "mpiddp/train/replica_check.hpp"

namespace mpiddp::train {

namespace {

// BatchNorm normalises over the global micro-batch when its statistics are shared
// (batchnorm.sync, on several ranks), else over the rank's own.
bool shares_statistics(const config::Config& config, int world) { return config.batchnorm_sync && world > 1; }

}  // namespace

template <typename T>
SynchronizedStep<T>::SynchronizedStep(const StepParts<T>& parts)
    : MicroBatchStep<T>(parts, shares_statistics(parts.config, parts.comm.size()) ? parts.comm.size() : 1),
      scope_(sharding_scope(parts.optimizer, parts.comm)) {
  const config::Config& config = parts.config;
  const int world = parts.comm.size();
  this->pipeline_.training_pass().statistics = this->statistics_ranks() > 1 ? &parts.statistics : nullptr;
  broadcast_buffers_each_step_ =
      !config.batchnorm_sync && world > 1 &&
      this->model_.buffer_value_count() + this->model_.buffer_counter_count() > 0;
}

template <typename T>
GemmChoice SynchronizedStep<T>::start(int threads) {
  scope_->place_parameters(this->parts_.reducer, this->model_);
  return MicroBatchStep<T>::start(threads);
}

template <typename T>
void SynchronizedStep<T>::before_pass() {
  share_rank0_buffers();
}

template <typename T>
void SynchronizedStep<T>::before_evaluation() {
  share_rank0_buffers();
}

template <typename T>
void SynchronizedStep<T>::share_rank0_buffers() {
  if (broadcast_buffers_each_step_) broadcast_buffers(this->parts_.comm, this->model_);
}

template class SynchronizedStep<float>;
template class SynchronizedStep<double>;

}  // namespace mpiddp::train
