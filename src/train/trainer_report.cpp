// What rank 0 reports at the end of an epoch, and the collectives that feed it: the step
// strategy's evaluation of the training and evaluation sets, then the epoch record and the
// table's row. The run record is written by start() (trainer_start.cpp), the end record by
// run() in trainer.cpp.
#include "mpiddp/train/trainer.hpp"

#include <chrono>
#include <cstdio>

#include "mpiddp/record/step_profile.hpp"

namespace mpiddp::train {

template <typename T>
EpochResult Trainer<T>::finish_epoch(int64_t epoch, int64_t step, double train_seconds, Index samples_seen) {
  const auto start = std::chrono::steady_clock::now();
  EpochResult e;
  e.epoch = epoch;
  step_->before_evaluation();
  const nn::EvalSums on_train = step_->evaluate(train_);
  e.train_loss = on_train.loss_sum;
  // The training set's sums serve as the evaluation's unless the evaluation set is another
  // set or a prefix of it; an evaluation already made at this step (eval.every_steps) is reused.
  const bool own_set = eval_ || evaluation_set_.samples < train_.samples;
  Evaluation evaluation = own_set || evaluated_step_ == step || !live_parameters_.empty()
                              ? evaluation_at(step) : Evaluation{on_train, std::nullopt};
  if (!own_set) evaluation.live = on_train;  // the same set: the same sums, taken once
  const nn::EvalSums& on_eval = evaluation.live;
  e.eval_loss = on_eval.loss_sum;
  if (loss_->is_classification()) e.eval_accuracy = on_eval.correct;
  if (evaluation.average) e.eval_loss_ema = evaluation.average->loss_sum;
  if (record::StepTrace* traced = observer_.traced()) traced->add(record::SpanKind::kEvaluation, start, std::chrono::steady_clock::now());
  e.time_s = train_seconds + record::seconds_since(start);
  e.samples_per_s = static_cast<double>(samples_seen) / train_seconds;

  if (comm_.rank() == 0) {
    io::Json record = {{"kind", "epoch"}, {"epoch", e.epoch}, {"eval_loss", e.eval_loss}};
    if (e.eval_accuracy) record["eval_accuracy"] = *e.eval_accuracy;
    if (e.eval_loss_ema) record["eval_loss_ema"] = *e.eval_loss_ema;
    if (eval_) record["train_loss"] = e.train_loss;
    record["time_s"] = e.time_s;
    record["samples_per_s"] = e.samples_per_s;
    record["step"] = step;  // appended: the record keeps its earlier prefix
    log_->write(record);
    if (!options_.quiet) {
      char accuracy[32] = "-";
      if (e.eval_accuracy) std::snprintf(accuracy, sizeof accuracy, "%.4f", *e.eval_accuracy);
      std::printf("%6lld  %14.8g  %9s  %8.3f  %10.0f\n", static_cast<long long>(e.epoch),
                  e.eval_loss, accuracy, e.time_s, e.samples_per_s);
      std::fflush(stdout);
    }
  }
  track_evaluation(evaluation, epoch, step, {epoch + 1, 0, step});
  return e;
}

#define MPIDDP_INSTANTIATE(T) \
  template EpochResult Trainer<T>::finish_epoch(int64_t, int64_t, double, Index);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
