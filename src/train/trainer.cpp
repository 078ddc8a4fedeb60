// The training loop: epochs and steps, and the calls that make one step, one epoch's end
// and the run's end. What a step does in this run's mode is the step strategy's
// (step_strategy.hpp); the pieces around it live beside this file (trainer.hpp's header).
#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "mpiddp/record/progress.hpp"

namespace mpiddp::train {

template <typename T>
void Trainer<T>::save_checkpoint(checkpoint::TrainingPosition position, bool best) {
  position.evaluations = evaluator_->state();
  std::optional<io::Json> best_record;
  if (best) best_record = io::Json{{"metric", evaluator_->best().metric()}, {"value", *evaluator_->best().best()}};
  checkpointer_->save(position, best_record);
}

template <typename T>
RunResult Trainer<T>::run() {
  const auto run_start = std::chrono::steady_clock::now();
  start();
  // A run resumed from the checkpoint of the step where early stopping ended it only finishes.
  if (evaluator_->stopped_early())
    evaluator_->report_resumed_stop(position_.batch == 0 ? position_.epoch - 1 : position_.epoch, position_.step);
  RunResult result;
  const Index per_rank = data_.sampler.per_rank();
  const Index steps_per_epoch = data_.sampler.steps_per_epoch(data_.batch_per_rank);
  const int64_t total_steps = steps_per_epoch * config_.epochs;
  if (options_.keep_history) result.step_losses.reserve(static_cast<size_t>(total_steps));
  start_trace(total_steps);
  record::ProgressLine progress(stderr, record::ProgressLine::mode_for(stderr, options_.quiet, comm_.rank() == 0,
                                                               std::getenv("MPIDDP_PROGRESS")),
                        config_.epochs, total_steps, data_.batch_per_rank * comm_.size());
  int64_t step = position_.step;
  for (int64_t epoch = position_.epoch; epoch <= config_.epochs && !evaluator_->stopped_early(); ++epoch) {
    data_.sampler.set_epoch(epoch - 1, replay_order(epoch - 1));
    // The profile covers the epochs after the first, which warms up caches and pages.
    if (options_.profile && epoch <= 2) options_.profile->reset();
    const auto epoch_start = std::chrono::steady_clock::now();
    const Index first_batch = epoch == position_.epoch ? position_.batch : 0;
    Index k = first_batch;
    for (; k < steps_per_epoch && !evaluator_->stopped_early(); ++k) {
      // Note [stopping on a signal]: the previous step's reduction carried every rank's stop
      // vote, so every rank stops here together, after the epoch's end when that step ended
      // one. A signal in the run's last step changes nothing: the run is finishing anyway.
      if (stop_requested_) stop_for_interrupt({epoch, k, step});
      ++step;
      const Index first = k * data_.batch_per_rank;
      // The next step's batch is gathered on the batch pipeline's worker while this one computes.
      if (k + 1 < steps_per_epoch)
        replica_.pipeline->prefetch(data_.sampler.indices().data() + first + data_.batch_per_rank,
                           std::min(data_.batch_per_rank, per_rank - first - data_.batch_per_rank), epoch - 1);
      const StepDone done = train_step(epoch, step, data_.sampler.indices().data() + first,
                                       std::min(data_.batch_per_rank, per_rank - first), total_steps);
      if (options_.keep_history) result.step_losses.push_back(done.loss);
      if (!done.applied) continue;
      if (config_.check_every_steps > 0 && step % config_.check_every_steps == 0)
        guard_->verify_replicas(step, false, nullptr);
      progress.update(epoch, step, done.loss, record::seconds_since(run_start));
      const bool epoch_ends = k + 1 == steps_per_epoch;
      if (evaluator_->due(step)) {
        progress.clear();  // the evaluation's table line goes where the progress line was
        evaluator_->evaluate_during_epoch(epoch, step, epoch_ends ? checkpoint::TrainingPosition{epoch + 1, 0, step}
                                                      : checkpoint::TrainingPosition{epoch, k + 1, step});
      }
      if (!epoch_ends && checkpoint::checkpoint_due_mid_epoch(config_.checkpoint, step))
        save_checkpoint({epoch, k + 1, step});
    }
    progress.clear();  // the epoch's table line goes where the progress line was
    // Early stopping within an epoch leaves it unfinished: no epoch record.
    if (k < steps_per_epoch) break;
    // A resumed epoch trains only the samples after its first batch.
    const EpochResult done = evaluator_->finish_epoch(epoch, step, record::seconds_since(epoch_start),
                                          (per_rank - first_batch * data_.batch_per_rank) * comm_.size());
    if (options_.keep_history) result.epochs.push_back(done);
    if (checkpoint::checkpoint_due_after_epoch(config_.checkpoint, epoch, step, epoch == config_.epochs))
      save_checkpoint({epoch + 1, 0, step});
  }
  progress.finish(record::seconds_since(run_start));
  finish_run(step, run_start, result);
  return result;
}

template <typename T>
void Trainer<T>::finish_run(int64_t step, std::chrono::steady_clock::time_point run_start, RunResult& result) {
  observer_.stop();
  result.steps = step;
  guard_->verify_replicas(step, true, &result.replicas);
  checkpointer_->save_final_weights();
  finish_trace();
  result.skipped_steps = guard_->skipped_steps();
  result.evaluations = evaluator_->take_history();
  result.early_stop_step = evaluator_->early_stop_step();
  result.resyncs = guard_->resyncs();
  result.time_s = record::seconds_since(run_start);
  record_->end({.steps = result.steps,
                .param_checksum = result.replicas.checksum,
                .replicas_identical = result.replicas.identical,
                .max_replica_diff = result.replicas.max_diff,
                .skipped_steps = result.skipped_steps,
                .resyncs = result.resyncs,
                .time_s = result.time_s});
}

std::unique_ptr<TrainingRun> prepare_training(const config::Config& config, distributed::Communicator& comm,
                                              TrainOptions options) {
  if (config.dtype == "float64") return std::make_unique<Trainer<double>>(config, comm, options);
  return std::make_unique<Trainer<float>>(config, comm, options);
}

RunResult run_training(const config::Config& config, distributed::Communicator& comm, TrainOptions options) {
  return prepare_training(config, comm, options)->run();
}

template class Trainer<float>;
template class Trainer<double>;

}  // namespace mpiddp::train
