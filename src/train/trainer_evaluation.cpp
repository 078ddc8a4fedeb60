// Evaluations during an epoch (eval.every_steps) and what follows from any evaluation: the
// best checkpoint (checkpoint.keep_best) and early stopping (early_stopping.*).
//
// Note [deciding together]
// Early stopping ends the loop, and a new best writes a checkpoint, which is a collective
// when the optimizer is sharded: a rank that decided otherwise than the others would wait
// in a collective they never enter (the hang of Lightning-AI/pytorch-lightning#379). Every
// rank computes the evaluation's sums by the same allreduce, but an allreduce may round
// apart on different ranks, so the values the trackers take are rank 0's, broadcast: every
// rank then takes the same values, in the same evaluations, and reaches the same verdicts.
#include <chrono>
#include <cstdio>

#include "mpiddp/core/error.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {

template <typename T>
void Trainer<T>::plan_evaluations() {
  evaluation_set_ = eval_ ? *eval_ : train_;
  if (config_.eval.max_samples > 0 && config_.eval.max_samples < evaluation_set_.samples)
    evaluation_set_.samples = config_.eval.max_samples;  // a prefix: the same at every world size
  const auto check_metric = [&](const std::string& metric, const std::string& key) {
    if (metric == "eval_accuracy" && !loss_->is_classification())
      throw ConfigError(key, "\"eval_accuracy\" is computed for classification losses only; this "
                             "run's loss is \"" + config_.loss.type + "\" (use \"eval_loss\")");
    if (metric == "eval_loss_ema" && config_.optimizer.ema_decay <= 0.0)
      throw ConfigError(key, "\"eval_loss_ema\" is computed only with an average of the weights; "
                             "set ema.decay (0.999, say)");
  };
  if (!config_.checkpoint.keep_best.empty()) {
    check_metric(config_.checkpoint.keep_best, "checkpoint.keep_best");
    best_.emplace(config_.checkpoint.keep_best, 0.0);
  }
  if (config_.early_stopping.enabled()) {
    check_metric(config_.early_stopping.metric, "early_stopping.metric");
    stopping_.emplace(config_.early_stopping.metric, config_.early_stopping.min_delta);
  }
}

template <typename T>
bool Trainer<T>::evaluation_due(int64_t step) const {
  return config_.eval.every_steps > 0 && step % config_.eval.every_steps == 0;
}

template <typename T>
typename Trainer<T>::Evaluation Trainer<T>::evaluation_at(int64_t step) {
  if (evaluated_step_ != step) {
    step_->before_evaluation();
    evaluated_.live = step_->evaluate(evaluation_set_);
    if (!live_parameters_.empty()) evaluated_.average = evaluate_average();
    evaluated_step_ = step;
  }
  return evaluated_;
}

template <typename T>
nn::EvalSums Trainer<T>::evaluate_average() {
  // The average takes the parameters' place in the one parameter buffer for the evaluation
  // (every layer reads its views of it), and the parameters come back bit for bit. The
  // evaluations end in an allreduce, so no rank reads the buffer when another swaps it.
  optimizer_->swap_in_average(model_->parameters(), live_parameters_.data());
  const nn::EvalSums sums = step_->evaluate(evaluation_set_);
  optimizer_->restore_parameters(model_->parameters(), live_parameters_.data());
  return sums;
}

template <typename T>
void Trainer<T>::evaluate_during_epoch(int64_t epoch, int64_t step,
                                       const checkpoint::TrainingPosition& resume_at) {
  const auto start = std::chrono::steady_clock::now();
  const Evaluation evaluation = evaluation_at(step);
  const nn::EvalSums& sums = evaluation.live;
  const double seconds = record::seconds_since(start);
  if (record::StepTrace* traced = observer_.traced()) traced->add(record::SpanKind::kEvaluation, start, std::chrono::steady_clock::now());
  if (options_.keep_history)
    evaluations_.push_back({epoch, step, sums.loss_sum,
                            loss_->is_classification() ? std::optional<double>(sums.correct) : std::nullopt,
                            evaluation.average ? std::optional<double>(evaluation.average->loss_sum) : std::nullopt});
  if (comm_.rank() == 0) {
    io::Json record = {{"kind", "eval"}, {"epoch", epoch}, {"step", step}, {"eval_loss", sums.loss_sum}};
    if (loss_->is_classification()) record["eval_accuracy"] = sums.correct;
    if (evaluation.average) record["eval_loss_ema"] = evaluation.average->loss_sum;
    record["samples"] = evaluation_set_.samples;
    record["time_s"] = seconds;
    log_->write(record);
    if (!options_.quiet) {
      char accuracy[32] = "-", at[32];
      if (loss_->is_classification()) std::snprintf(accuracy, sizeof accuracy, "%.4f", sums.correct);
      std::snprintf(at, sizeof at, "step %lld", static_cast<long long>(step));
      std::printf("%6lld  %14.8g  %9s  %8.3f  %10s\n", static_cast<long long>(epoch), sums.loss_sum,
                  accuracy, seconds, at);
      std::fflush(stdout);
    }
  }
  track_evaluation(evaluation, epoch, step, resume_at);
}

template <typename T>
void Trainer<T>::track_evaluation(const Evaluation& evaluation, int64_t epoch, int64_t step,
                                  const checkpoint::TrainingPosition& resume_at) {
  if ((!best_ && !stopping_) || tracked_step_ == step) return;
  tracked_step_ = step;
  // Note [deciding together]: rank 0's values on every rank.
  double values[3] = {evaluation.live.loss_sum, evaluation.live.correct,
                      evaluation.average ? evaluation.average->loss_sum : 0.0};
  comm_.broadcast(values, sizeof values, 0);
  const auto value_of = [&](const std::string& metric) {
    return metric == "eval_accuracy" ? values[1] : metric == "eval_loss_ema" ? values[2] : values[0];
  };
  if (stopping_) stopping_->observe(value_of(stopping_->metric()), step);
  if (best_ && best_->observe(value_of(best_->metric()), step)) save_checkpoint(resume_at, /*best=*/true);
  if (!stopping_ || stopping_->evaluations_since_best() < config_.early_stopping.patience) return;
  stopped_early_ = true;
  report_early_stop(epoch, step, value_of(stopping_->metric()));
}

template <typename T>
void Trainer<T>::report_early_stop(int64_t epoch, int64_t step, std::optional<double> value) {
  early_stop_step_ = step;
  if (comm_.rank() != 0) return;
  io::Json record = {{"kind", "early_stop"}, {"epoch", epoch}, {"step", step}, {"metric", stopping_->metric()}};
  record["value"] = value ? io::Json(*value) : io::Json(nullptr);  // null: resumed at the stop
  record["best"] = stopping_->best() ? io::Json(*stopping_->best()) : io::Json(nullptr);
  record["best_step"] = stopping_->best_step();
  record["patience"] = config_.early_stopping.patience;
  record["min_delta"] = config_.early_stopping.min_delta;
  log_->write(record);
  if (!options_.quiet) {
    std::printf("early stop after step %lld: %s has not improved on %.8g (step %lld) for %lld evaluations\n",
                static_cast<long long>(step), stopping_->metric().c_str(),
                stopping_->best() ? *stopping_->best() : 0.0, static_cast<long long>(stopping_->best_step()),
                static_cast<long long>(config_.early_stopping.patience));
    std::fflush(stdout);
  }
}

template <typename T>
io::Json Trainer<T>::evaluation_state() const {
  if (!best_ && !stopping_) return nullptr;
  io::Json state = io::Json::object();
  if (best_) state["keep_best"] = best_->state();
  if (stopping_) state["early_stopping"] = stopping_->state();
  return state;
}

template <typename T>
void Trainer<T>::restore_evaluation_state(const io::Json& state) {
  if (!state.is_object()) return;
  if (best_ && state.contains("keep_best")) best_->restore(state["keep_best"]);
  if (stopping_ && state.contains("early_stopping")) stopping_->restore(state["early_stopping"]);
  // A run resumed from the checkpoint of the step where it stopped early stops again there.
  if (stopping_ && stopping_->evaluations_since_best() >= config_.early_stopping.patience) stopped_early_ = true;
}

#define MPIDDP_INSTANTIATE(T)                                                                       \
  template void Trainer<T>::plan_evaluations();                                                     \
  template bool Trainer<T>::evaluation_due(int64_t) const;                                          \
  template typename Trainer<T>::Evaluation Trainer<T>::evaluation_at(int64_t);                      \
  template nn::EvalSums Trainer<T>::evaluate_average();                                             \
  template void Trainer<T>::evaluate_during_epoch(int64_t, int64_t, const checkpoint::TrainingPosition&); \
  template void Trainer<T>::track_evaluation(const Evaluation&, int64_t, int64_t,                   \
                                             const checkpoint::TrainingPosition&);                  \
  template void Trainer<T>::report_early_stop(int64_t, int64_t, std::optional<double>);              \
  template io::Json Trainer<T>::evaluation_state() const;                                           \
  template void Trainer<T>::restore_evaluation_state(const io::Json&);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
