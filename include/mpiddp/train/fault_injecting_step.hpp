#pragma once
// A step strategy around another, which injects the faults of debug.* (fault_injection.hpp)
// between its parts: after this rank's gradients are computed and before they are reduced
// (throw, nan, stall, exit, kill, signal, then a mismatched collective), and after the
// update (perturb). make_step_strategy installs it only when debug.fail_rank names a rank,
// so no production step runs a line of it.
#include <memory>

#include "mpiddp/config/fault.hpp"
#include "mpiddp/train/step_strategy.hpp"

namespace mpiddp::train {

template <typename T>
class FaultInjectingStep final : public StepStrategy<T> {
 public:
  FaultInjectingStep(std::unique_ptr<StepStrategy<T>> inner, const StepParts<T>& parts);

  GemmChoice start(int threads) override { return inner_->start(threads); }
  void place_gradient_buffer(distributed::GradientReducer<T>& reducer, nn::Model<T>& model) override {
    inner_->place_gradient_buffer(reducer, model);
  }
  int threads(int chosen) const override { return inner_->threads(chosen); }
  double compute_gradients(const Index* samples, Index count) override;
  StepOutcome reduce(double local_loss) override { return inner_->reduce(local_loss); }
  double update(double lr) override;
  nn::EvalSums evaluate(const data::Dataset<T>& set) override { return inner_->evaluate(set); }
  void before_evaluation() override { inner_->before_evaluation(); }
  void swap_in_average(T* kept) override { inner_->swap_in_average(kept); }
  void restore_parameters(const T* kept) override { inner_->restore_parameters(kept); }
  std::optional<ReplicaReport> report_from_parts() override { return inner_->report_from_parts(); }
  bool keeps_replicas_identical() const override { return inner_->keeps_replicas_identical(); }
  void describe(io::Json& run_record) const override { inner_->describe(run_record); }
  size_t communication_spans_per_step(size_t buckets) const override { return inner_->communication_spans_per_step(buckets); }

 private:
  // The step being computed: the training pass's, which the loop sets before each step.
  int64_t step() const { return pipeline_.training_pass().step; }

  std::unique_ptr<StepStrategy<T>> inner_;
  const config::FaultInjection& faults_;
  distributed::Communicator& comm_;
  BatchPipeline<T>& pipeline_;
};

}  // namespace mpiddp::train
