// The trainer's run() loop: epochs, steps, and the calls that make one step, one epoch's
// end and the run's end. The pieces live beside it (see trainer.hpp's header): the setup
// in trainer_setup.cpp, the step in trainer_step.cpp, the fault policies in
// trainer_faults.cpp, rank 0's reporting in trainer_report.cpp and the persistence in
// trainer_checkpointing.cpp. The class is instantiated here, its members there.
#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "mpiddp/optim/schedule.hpp"
#include "mpiddp/train/fault_injection.hpp"
#include "mpiddp/train/progress.hpp"
#include "mpiddp/train/step_profile.hpp"

namespace mpiddp::train {

template <typename T>
RunResult Trainer<T>::run() {
  const auto run_start = std::chrono::steady_clock::now();
  eval_chunk_.assign(batch_per_rank_, 0);
  start();
  RunResult result;
  const Index per_rank = sampler_.per_rank();
  const Index steps_per_epoch = (per_rank + batch_per_rank_ - 1) / batch_per_rank_;
  const int64_t total_steps = steps_per_epoch * config_.epochs;
  if (options_.keep_history) result.step_losses.reserve(static_cast<size_t>(total_steps));
  start_trace(total_steps);
  ProgressLine progress(stderr, ProgressLine::mode_for(stderr, options_.quiet, comm_.rank() == 0,
                                                               std::getenv("MPIDDP_PROGRESS")),
                        config_.epochs, total_steps, batch_per_rank_ * comm_.size());
  int64_t step = position_.step;
  for (int64_t epoch = position_.epoch; epoch <= config_.epochs; ++epoch) {
    sampler_.set_epoch(epoch - 1, replay_order(epoch - 1));
    // The profile covers the epochs after the first, which warms up caches and pages.
    if (options_.profile && epoch <= 2) options_.profile->reset();
    const auto epoch_start = std::chrono::steady_clock::now();
    const Index first_batch = epoch == position_.epoch ? position_.batch : 0;
    for (Index k = first_batch; k < steps_per_epoch; ++k) {
      // Note [stopping on a signal]: the previous step's reduction carried every rank's stop
      // vote, so every rank stops here together, after the epoch's end when that step ended
      // one. A signal in the run's last step changes nothing: the run is finishing anyway.
      if (stop_requested_) stop_for_interrupt({epoch, k, step});
      ++step;
      // The one test that decides whether this step is traced (step_trace.hpp).
      traced_ = trace_.selects(step) ? &trace_ : nullptr;
      reducer_.set_listener(traced_);
      trace_.begin_step(step);
      const auto step_start = std::chrono::steady_clock::now();
      phases_.start(options_.profile, traced_, step_start);
      comm_.publish_step(step);
      set_pass(epoch - 1, step);
      const Index first = k * batch_per_rank_;
      const Index count = std::min(batch_per_rank_, per_rank - first);
      const double cpu_start = options_.profile ? process_cpu_seconds() : 0.0;
      // Fault injection writes into the gradient buffer after backward, which an overlapped
      // reduction may already be sending: a run with injection reduces after backward.
      const bool overlap =
          config_.sync && config_.reduce.overlap && !config_.faults.inject.enabled();
      const double local_loss =
          compute_gradients(sampler_.indices().data() + first, count, overlap);
      inject_step_fault(config_.faults.inject, comm_.rank(), step, model_->gradients());
      inject_collective_fault(config_.faults.inject, comm_, step);
      const double loss = config_.sync ? synchronize(local_loss) : unsynchronized_loss(local_loss);
      if (options_.keep_history) result.step_losses.push_back(loss);
      if (!step_is_finite(loss)) {
        handle_nonfinite_step(step, epoch);  // throws unless the step is skipped: no update
        continue;
      }
      skipped_in_a_row_ = 0;
      const double lr = optim::scheduled_lr(config_.schedule, config_.optimizer.lr, step, epoch,
                                            total_steps, config_.epochs);
      phases_.lap(SpanKind::kCheck);  // not in the profile, which times the optimizer alone
      const double optimizer_cpu_start = options_.profile ? thread_cpu_seconds() : 0.0;
      optimizer_->step(model_->parameters(), model_->gradients(), lr);  // collective when sharded
      phases_.lap(&StepProfile::optimizer_s, SpanKind::kOptimizer);
      if (options_.profile) options_.profile->optimizer_cpu_s += thread_cpu_seconds() - optimizer_cpu_start;
      // The step record's time_s and the trace's step span are the same two readings.
      const auto step_end = phases_.last_or_now();
      if (traced_) traced_->add(SpanKind::kStep, step_start, step_end);
      if (options_.profile) {
        options_.profile->cpu_s += process_cpu_seconds() - cpu_start;
        ++options_.profile->steps;
      }
      inject_update_fault(config_.faults.inject, comm_.rank(), step, model_->parameters());
      if (comm_.rank() == 0 && step % config_.log_every_steps == 0)
        log_->write({{"kind", "step"}, {"epoch", epoch}, {"step", step}, {"loss", loss}, {"lr", lr},
                     {"time_s", std::chrono::duration<double>(step_end - step_start).count()}});
      if (config_.check_every_steps > 0 && step % config_.check_every_steps == 0)
        verify_replicas(step, false, nullptr);
      progress.update(epoch, step, loss, seconds_since(run_start));
      if (k + 1 < steps_per_epoch && checkpoint_due_mid_epoch(config_.checkpoint, step))
        save_checkpoint({epoch, k + 1, step});
    }
    progress.clear();  // the epoch's table line goes where the progress line was
    // A resumed epoch trains only the samples after its first batch.
    const EpochResult done = finish_epoch(epoch, seconds_since(epoch_start),
                                          (per_rank - first_batch * batch_per_rank_) * comm_.size());
    if (options_.keep_history) result.epochs.push_back(done);
    if (checkpoint_due_after_epoch(config_.checkpoint, epoch, step, epoch == config_.epochs))
      save_checkpoint({epoch + 1, 0, step});
  }
  progress.finish(seconds_since(run_start));
  phases_.stop();  // compute_gradients called after run() (tests) times nothing
  result.steps = step;
  verify_replicas(step, true, &result);
  save_final_weights();
  finish_trace();
  result.skipped_steps = skipped_total_;
  result.resyncs = resyncs_;
  result.time_s = seconds_since(run_start);
  if (comm_.rank() == 0)
    log_->write({{"kind", "end"},
                {"steps", result.steps},
                {"param_checksum", result.replicas.checksum},
                {"replicas_identical", result.replicas.identical},
                {"max_replica_diff", result.replicas.max_diff},
                {"skipped_steps", result.skipped_steps},
                {"resyncs", result.resyncs},
                {"time_s", result.time_s}});
  return result;
}

std::unique_ptr<TrainingRun> prepare_training(const Config& config, distributed::Communicator& comm,
                                              TrainOptions options) {
  if (config.dtype == "float64") return std::make_unique<Trainer<double>>(config, comm, options);
  return std::make_unique<Trainer<float>>(config, comm, options);
}

RunResult run_training(const Config& config, distributed::Communicator& comm, TrainOptions options) {
  return prepare_training(config, comm, options)->run();
}

template class Trainer<float>;
template class Trainer<double>;

}  // namespace mpiddp::train
