// The trainer's step trace (`--trace`, trace.path): its memory and time origin before the
// first step, and the merged file after the last. The spans themselves are taken where the
// trainer times its phases (the observer's PhaseClock, lapped by the step strategies, the batch
// pipeline and train_step) and in the reducer.
#include <algorithm>
#include <chrono>

#include "mpiddp/record/trace_file.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {

template <typename T>
void Trainer<T>::start_trace(int64_t total_steps) {
  if (!observer_.trace().enabled()) return;
  const int64_t first = std::max(config_.trace.first_step, position_.step + 1);
  const int64_t last = std::min(config_.trace.last_step, total_steps);
  // A step's spans: the step, zero_grad, data/forward/backward per micro-batch, the wait,
  // the optimizer, each bucket's reduction, and after it at most an evaluation and two
  // checkpoints (mid-epoch and end of epoch).
  const size_t buckets = step_->communication_spans_per_step(
      replica_.reducer.bucket_count(static_cast<size_t>(replica_.model->gradient_count())));
  const size_t per_step = 2 + 3 * static_cast<size_t>(config_.accumulate_steps) + 2 + buckets + 3;
  observer_.trace().reserve(last - first + 1, per_step);
  const bool shm = replica_.reducer.algorithm() == distributed::ReduceAlgorithm::kShm;
  observer_.trace().set_reduction_path(comm_.size() == 1                        ? "none"
                            : !shm                                   ? "mpi"
                            : comm_.ranks_on_node() == comm_.size() ? "shm"
                                                                     : "two-level",
                            shm);
  // Note [aligned trace clocks]: every rank takes time 0 right after the same barrier, so
  // the ranks' spans line up to within the barrier's exit skew: the time its release takes
  // to reach the last rank (microseconds on one node, about a network latency across nodes).
  // The steady clocks may drift apart after that, at most at NTP's slew rate (500 ppm).
  comm_.barrier();
  observer_.trace().set_origin(std::chrono::steady_clock::now());
}

template <typename T>
void Trainer<T>::finish_trace() {
  observer_.end_trace();
  replica_.reducer.set_listener(nullptr);
  if (observer_.trace().enabled()) record::write_trace(comm_, observer_.trace(), config_.trace);
}

template void Trainer<float>::start_trace(int64_t);
template void Trainer<double>::start_trace(int64_t);
template void Trainer<float>::finish_trace();
template void Trainer<double>::finish_trace();

}  // namespace mpiddp::train
