#pragma once
// The trainer's evaluations, as one part: eval.every_steps' evaluations and the epoch's, the
// average of the weights in the parameters' place (ema.decay), their records and table rows,
// and what follows from them: the best checkpoint (checkpoint.keep_best) and early stopping
// (early_stopping.*), decided alike on every rank (Note [deciding together] in
// src/train/evaluator.cpp).
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/data/dataset.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/record/run_log_writer.hpp"
#include "mpiddp/record/step_observer.hpp"
#include "mpiddp/train/improvement.hpp"
#include "mpiddp/train/step_strategy.hpp"

namespace mpiddp::train {

struct EpochResult {
  int64_t epoch = 0;          // 1-based
  double eval_loss = 0.0;     // over data.eval when configured, else over the training set
  std::optional<double> eval_accuracy;  // classification only
  std::optional<double> eval_loss_ema;  // the average of the weights' (ema.decay)
  std::optional<double> eval_bpb;       // text models: eval_loss in bits per byte of text
  double train_loss = 0.0;    // over the whole training set, after the epoch's updates
  double time_s = 0.0;
  double samples_per_s = 0.0;
};

// An evaluation of eval.every_steps (an eval record).
struct EvaluationResult {
  int64_t epoch = 0, step = 0;
  double eval_loss = 0.0;
  std::optional<double> eval_accuracy;  // classification only
  std::optional<double> eval_loss_ema;  // ema.decay only
  std::optional<double> eval_bpb;       // text models only
};

// Checks the metrics that checkpoint.keep_best and early_stopping name against what a run
// with this loss computes. Local; throws ConfigError naming the key.
void check_evaluation_metrics(const config::Config& config, bool classification);

template <typename T>
class Evaluator {
 public:
  // What the evaluator works on; all of it outlives it.
  struct Parts {
    const config::Config& config;
    distributed::Communicator& comm;
    const data::Dataset<T>& train;
    StepStrategy<T>& step;
    optim::Optimizer<T>& optimizer;
    nn::Model<T>& model;
    const nn::Loss<T>& loss;
    record::RunLogWriter& log;  // rank 0's run log (a disabled writer elsewhere)
    record::StepObserver& observer;
    bool keep_history;  // TrainOptions::keep_history: keep every evaluation for RunResult
    bool quiet;         // no table rows on stdout
    // Writes the best checkpoint at `resume_at` (collective when the optimizer is sharded).
    std::function<void(const checkpoint::TrainingPosition& resume_at)> save_best;
  };
  // eval: data.eval, when configured. Local.
  Evaluator(Parts parts, std::optional<data::Dataset<T>> eval);

  // Whether eval.every_steps asks for an evaluation after `step`.
  bool due(int64_t step) const;
  // eval.every_steps' evaluation at `step`: the eval record, its table row and what follows
  // from it; resume_at is where a best checkpoint written now resumes. Collective.
  void evaluate_during_epoch(int64_t epoch, int64_t step, const checkpoint::TrainingPosition& resume_at);
  // The epoch's end: the training set's and the evaluation set's sums, the epoch record and
  // its table row, then the trackers. Collective.
  EpochResult finish_epoch(int64_t epoch, int64_t step, double train_seconds, Index samples_seen);

  // Early stopping's patience ran out (every rank alike), and the step after which it did.
  bool stopped_early() const { return stopped_early_; }
  int64_t early_stop_step() const { return early_stop_step_; }
  // A run resumed from the checkpoint of the step where early stopping ended it: the record
  // and line again, with no value.
  void report_resumed_stop(int64_t epoch, int64_t step) { report_early_stop(epoch, step, std::nullopt); }
  // The best checkpoint's metric and value, for its checkpoint record (keep_best only).
  const ImprovementTracker& best() const { return *best_; }

  // The trackers' state for a checkpoint (TrainingPosition::evaluations), and back.
  io::Json state() const;
  void restore(const io::Json& state);
  // The eval.every_steps evaluations so far (keep_history), handed over once at the end.
  std::vector<EvaluationResult> take_history() { return std::move(history_); }

 private:
  struct Evaluation {
    nn::EvalSums live;                    // the parameters'
    std::optional<nn::EvalSums> average;  // the average's (ema.decay)
  };
  // The evaluation set's sums at `step` (computed once per step, collective).
  Evaluation evaluation_at(int64_t step);
  // The evaluation set's sums with the average of the parameters in their place (collective
  // when the optimizer is sharded); the parameters are back when it returns.
  nn::EvalSums evaluate_average();
  // The best checkpoint and early stopping's count, from the evaluation at `step` (every rank
  // alike, Note [deciding together]); resume_at is where its checkpoint resumes.
  void track(const Evaluation& evaluation, int64_t epoch, int64_t step,
             const checkpoint::TrainingPosition& resume_at);
  // The early_stop record and the table's line (rank 0); value: the evaluation's, none when
  // a run resumed at the step where it had stopped.
  void report_early_stop(int64_t epoch, int64_t step, std::optional<double> value);

  // eval_loss (nats per token) in bits per byte of the text the targets cover, for data with
  // a tokenizer and the cross-entropy loss (Note [bits per byte] in src/data/token_windows.cpp).
  std::optional<double> bits_per_byte(double eval_loss) const;

  Parts parts_;
  std::optional<data::Dataset<T>> eval_;
  // What "eval_loss" is measured on: data.eval, else the training set, cut to its first
  // eval.max_samples samples when that is set.
  data::Dataset<T> evaluation_set_;
  std::optional<double> nats_to_bits_per_byte_;  // 1 / (ln 2 x the mean bytes per target), text data only
  int64_t evaluated_step_ = -1;  // the step of evaluated_, -1: none yet
  Evaluation evaluated_;         // the evaluation set's sums at evaluated_step_
  nn::AlignedVector<T> live_parameters_;  // ema.decay: this rank's part of the parameters while the average is evaluated
  // ema.decay is on: every rank alike (live_parameters_ is empty on a rank whose part is).
  bool evaluates_average_ = false;
  int64_t tracked_step_ = -1;    // the step whose evaluation the trackers took last
  std::optional<ImprovementTracker> best_;      // checkpoint.keep_best
  std::optional<ImprovementTracker> stopping_;  // early_stopping
  bool stopped_early_ = false;  // early stopping's patience ran out: every rank stops together
  int64_t early_stop_step_ = 0;
  std::vector<EvaluationResult> history_;  // for RunResult, when keep_history
};

}  // namespace mpiddp::train
