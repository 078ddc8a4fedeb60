// The trainer's evaluations (include/mpiddp/train/evaluator.hpp): eval.every_steps' and the
// epoch's, and what follows from any evaluation: the best checkpoint (checkpoint.keep_best)
// and early stopping (early_stopping.*).
//
// Note [deciding together]
// Early stopping ends the loop, and a new best writes a checkpoint, which is a collective
// when the optimizer is sharded: a rank that decided otherwise than the others would wait
// in a collective they never enter (the hang of Lightning-AI/pytorch-lightning#379). Every
// rank computes the evaluation's sums by the same allreduce, but an allreduce may round
// apart on different ranks, so the values the trackers take are rank 0's, broadcast: every
// rank then takes the same values, in the same evaluations, and reaches the same verdicts.
#include "mpiddp/train/evaluator.hpp"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <utility>

#include "mpiddp/core/error.hpp"
#include "mpiddp/record/progress.hpp"

namespace mpiddp::train {

void check_evaluation_metrics(const config::Config& config, bool classification) {
  const auto check_metric = [&](const std::string& metric, const std::string& key) {
    if (metric == "eval_accuracy" && !classification)
      throw ConfigError(key, "\"eval_accuracy\" is computed for classification losses only; this "
                             "run's loss is \"" + config.loss.type + "\" (use \"eval_loss\")");
    if (metric == "eval_loss_ema" && config.optimizer.ema_decay <= 0.0)
      throw ConfigError(key, "\"eval_loss_ema\" is computed only with an average of the weights; "
                             "set ema.decay (0.999, say)");
  };
  if (!config.checkpoint.keep_best.empty()) check_metric(config.checkpoint.keep_best, "checkpoint.keep_best");
  if (config.early_stopping.enabled()) check_metric(config.early_stopping.metric, "early_stopping.metric");
}

template <typename T>
Evaluator<T>::Evaluator(Parts parts, std::optional<data::Dataset<T>> eval)
    : parts_(std::move(parts)), eval_(std::move(eval)), evaluation_set_(eval_ ? *eval_ : parts_.train) {
  const config::Config& config = parts_.config;
  if (config.eval.max_samples > 0 && config.eval.max_samples < evaluation_set_.samples)
    evaluation_set_.samples = config.eval.max_samples;  // a prefix: the same at every world size
  if (!config.checkpoint.keep_best.empty()) best_.emplace(config.checkpoint.keep_best, 0.0);
  if (config.early_stopping.enabled()) stopping_.emplace(config.early_stopping.metric, config.early_stopping.min_delta);
  // ema.decay: this rank's part of the parameters while the average is evaluated in their place.
  evaluates_average_ = config.optimizer.ema_decay > 0.0;
  if (evaluates_average_) live_parameters_.assign(parts_.optimizer.end() - parts_.optimizer.begin(), T(0));
  // Bits per byte need the bytes of text behind the targets, and a loss in nats per token.
  if (evaluation_set_.tokenizer && config.loss.type == "cross_entropy") {
    const double bytes = data::mean_target_text_bytes(evaluation_set_);
    if (bytes > 0.0) nats_to_bits_per_byte_ = 1.0 / (std::log(2.0) * bytes);
  }
}

template <typename T>
std::optional<double> Evaluator<T>::bits_per_byte(double eval_loss) const {
  if (!nats_to_bits_per_byte_) return std::nullopt;
  return eval_loss * *nats_to_bits_per_byte_;
}

template <typename T>
bool Evaluator<T>::due(int64_t step) const {
  return parts_.config.eval.every_steps > 0 && step % parts_.config.eval.every_steps == 0;
}

template <typename T>
EpochResult Evaluator<T>::finish_epoch(int64_t epoch, int64_t step, double train_seconds, Index samples_seen) {
  const auto start = std::chrono::steady_clock::now();
  EpochResult e;
  e.epoch = epoch;
  parts_.step.before_evaluation();
  const nn::EvalSums on_train = parts_.step.evaluate(parts_.train);
  e.train_loss = on_train.loss_sum;
  // The training set's sums serve as the evaluation's unless the evaluation set is another
  // set or a prefix of it; an evaluation already made at this step (eval.every_steps) is reused.
  const bool own_set = eval_ || evaluation_set_.samples < parts_.train.samples;
  Evaluation evaluation = own_set || evaluated_step_ == step || evaluates_average_
                              ? evaluation_at(step) : Evaluation{on_train, std::nullopt};
  if (!own_set) evaluation.live = on_train;  // the same set: the same sums, taken once
  const nn::EvalSums& on_eval = evaluation.live;
  e.eval_loss = on_eval.loss_sum;
  if (parts_.loss.is_classification()) e.eval_accuracy = on_eval.correct;
  if (evaluation.average) e.eval_loss_ema = evaluation.average->loss_sum;
  e.eval_bpb = bits_per_byte(e.eval_loss);
  if (record::StepTrace* traced = parts_.observer.traced()) traced->add(record::SpanKind::kEvaluation, start, std::chrono::steady_clock::now());
  e.time_s = train_seconds + record::seconds_since(start);
  e.samples_per_s = static_cast<double>(samples_seen) / train_seconds;

  if (parts_.comm.rank() == 0) {
    io::Json record = {{"kind", "epoch"}, {"epoch", e.epoch}, {"eval_loss", e.eval_loss}};
    if (e.eval_accuracy) record["eval_accuracy"] = *e.eval_accuracy;
    if (e.eval_loss_ema) record["eval_loss_ema"] = *e.eval_loss_ema;
    if (eval_) record["train_loss"] = e.train_loss;
    record["time_s"] = e.time_s;
    record["samples_per_s"] = e.samples_per_s;
    record["step"] = step;  // appended: the record keeps its earlier prefix
    if (e.eval_bpb) record["eval_bpb"] = *e.eval_bpb;
    parts_.log.write(record);
    if (!parts_.quiet) {
      char accuracy[32] = "-";
      if (e.eval_accuracy) std::snprintf(accuracy, sizeof accuracy, "%.4f", *e.eval_accuracy);
      std::printf("%6lld  %14.8g  %9s  %8.3f  %10.0f\n", static_cast<long long>(e.epoch),
                  e.eval_loss, accuracy, e.time_s, e.samples_per_s);
      std::fflush(stdout);
    }
  }
  track(evaluation, epoch, step, {epoch + 1, 0, step});
  return e;
}

template <typename T>
typename Evaluator<T>::Evaluation Evaluator<T>::evaluation_at(int64_t step) {
  if (evaluated_step_ != step) {
    parts_.step.before_evaluation();
    evaluated_.live = parts_.step.evaluate(evaluation_set_);
    if (evaluates_average_) evaluated_.average = evaluate_average();
    evaluated_step_ = step;
  }
  return evaluated_;
}

template <typename T>
nn::EvalSums Evaluator<T>::evaluate_average() {
  // The average takes the parameters' place for the evaluation (in the one parameter buffer,
  // whose views every layer reads, or, the parameters sharded, in this rank's part, from which
  // the units are gathered), and the parameters come back bit for bit. The evaluations end in
  // an allreduce, so no rank reads the buffer when another swaps it.
  parts_.step.swap_in_average(live_parameters_.data());
  const nn::EvalSums sums = parts_.step.evaluate(evaluation_set_);
  parts_.step.restore_parameters(live_parameters_.data());
  return sums;
}

template <typename T>
void Evaluator<T>::evaluate_during_epoch(int64_t epoch, int64_t step,
                                       const checkpoint::TrainingPosition& resume_at) {
  const auto start = std::chrono::steady_clock::now();
  const Evaluation evaluation = evaluation_at(step);
  const nn::EvalSums& sums = evaluation.live;
  const double seconds = record::seconds_since(start);
  if (record::StepTrace* traced = parts_.observer.traced()) traced->add(record::SpanKind::kEvaluation, start, std::chrono::steady_clock::now());
  if (parts_.keep_history)
    history_.push_back({epoch, step, sums.loss_sum,
                            parts_.loss.is_classification() ? std::optional<double>(sums.correct) : std::nullopt,
                            evaluation.average ? std::optional<double>(evaluation.average->loss_sum) : std::nullopt,
                            bits_per_byte(sums.loss_sum)});
  if (parts_.comm.rank() == 0) {
    io::Json record = {{"kind", "eval"}, {"epoch", epoch}, {"step", step}, {"eval_loss", sums.loss_sum}};
    if (parts_.loss.is_classification()) record["eval_accuracy"] = sums.correct;
    if (evaluation.average) record["eval_loss_ema"] = evaluation.average->loss_sum;
    record["samples"] = evaluation_set_.samples;
    record["time_s"] = seconds;
    if (const std::optional<double> bpb = bits_per_byte(sums.loss_sum)) record["eval_bpb"] = *bpb;
    parts_.log.write(record);
    if (!parts_.quiet) {
      char accuracy[32] = "-", at[32];
      if (parts_.loss.is_classification()) std::snprintf(accuracy, sizeof accuracy, "%.4f", sums.correct);
      std::snprintf(at, sizeof at, "step %lld", static_cast<long long>(step));
      std::printf("%6lld  %14.8g  %9s  %8.3f  %10s\n", static_cast<long long>(epoch), sums.loss_sum,
                  accuracy, seconds, at);
      std::fflush(stdout);
    }
  }
  track(evaluation, epoch, step, resume_at);
}

template <typename T>
void Evaluator<T>::track(const Evaluation& evaluation, int64_t epoch, int64_t step,
                         const checkpoint::TrainingPosition& resume_at) {
  if ((!best_ && !stopping_) || tracked_step_ == step) return;
  tracked_step_ = step;
  // Note [deciding together]: rank 0's values on every rank.
  double values[3] = {evaluation.live.loss_sum, evaluation.live.correct,
                      evaluation.average ? evaluation.average->loss_sum : 0.0};
  parts_.comm.broadcast(values, sizeof values, 0);
  const auto value_of = [&](const std::string& metric) {
    return metric == "eval_accuracy" ? values[1] : metric == "eval_loss_ema" ? values[2] : values[0];
  };
  if (stopping_) stopping_->observe(value_of(stopping_->metric()), step);
  if (best_ && best_->observe(value_of(best_->metric()), step)) parts_.save_best(resume_at);
  if (!stopping_ || stopping_->evaluations_since_best() < parts_.config.early_stopping.patience) return;
  stopped_early_ = true;
  report_early_stop(epoch, step, value_of(stopping_->metric()));
}

template <typename T>
void Evaluator<T>::report_early_stop(int64_t epoch, int64_t step, std::optional<double> value) {
  early_stop_step_ = step;
  if (parts_.comm.rank() != 0) return;
  io::Json record = {{"kind", "early_stop"}, {"epoch", epoch}, {"step", step}, {"metric", stopping_->metric()}};
  record["value"] = value ? io::Json(*value) : io::Json(nullptr);  // null: resumed at the stop
  record["best"] = stopping_->best() ? io::Json(*stopping_->best()) : io::Json(nullptr);
  record["best_step"] = stopping_->best_step();
  record["patience"] = parts_.config.early_stopping.patience;
  record["min_delta"] = parts_.config.early_stopping.min_delta;
  parts_.log.write(record);
  if (!parts_.quiet) {
    std::printf("early stop after step %lld: %s has not improved on %.8g (step %lld) for %lld evaluations\n",
                static_cast<long long>(step), stopping_->metric().c_str(),
                stopping_->best() ? *stopping_->best() : 0.0, static_cast<long long>(stopping_->best_step()),
                static_cast<long long>(parts_.config.early_stopping.patience));
    std::fflush(stdout);
  }
}

template <typename T>
io::Json Evaluator<T>::state() const {
  if (!best_ && !stopping_) return nullptr;
  io::Json state = io::Json::object();
  if (best_) state["keep_best"] = best_->state();
  if (stopping_) state["early_stopping"] = stopping_->state();
  return state;
}

template <typename T>
void Evaluator<T>::restore(const io::Json& state) {
  if (!state.is_object()) return;
  if (best_ && state.contains("keep_best")) best_->restore(state["keep_best"]);
  if (stopping_ && state.contains("early_stopping")) stopping_->restore(state["early_stopping"]);
  // A run resumed from the checkpoint of the step where it stopped early stops again there.
  if (stopping_ && stopping_->evaluations_since_best() >= parts_.config.early_stopping.patience) stopped_early_ = true;
}

template class Evaluator<float>;
template class Evaluator<double>;

}  // namespace mpiddp::train
