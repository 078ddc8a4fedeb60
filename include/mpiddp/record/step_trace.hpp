#pragma once
// The step timeline of `--trace` (trace.path): every rank records spans of its selected
// steps (trace.steps) in memory reserved before the first step, and rank 0 writes them all
// as one Chrome trace file at the end (record/trace_file.hpp; docs/log-format.md).
//
// The spans come from the clock readings the trainer takes anyway: the phase laps of
// PhaseClock (step_profile.hpp), the step's start and end that the step record's time_s
// is made of, and the reducer's bucket timings (distributed::ReductionListener). Outside
// the selected steps the trainer holds no pointer to the trace, so a lap costs its one
// null test, as without a profile.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/config/trace.hpp"

namespace mpiddp::record {

// What a span is. The order is the legend's in `mpiddp timeline`.
enum class SpanKind : uint8_t {
  kStep,           // one optimizer step, from its start to the optimizer's end
  kZeroGradients,  // clearing the gradients (the bench profile counts it as forward)
  kData,           // gathering a (micro-)batch
  kForward,        // forward pass and loss
  kBackward,       // backward pass, starting buckets as their gradients become final
  kReductionWait,  // after backward: waiting for the gradient reduction (the exposed part)
  kCheck,          // whether the reduced step is finite, and its learning rate
  kOptimizer,
  kReduction,      // one bucket's reduction (on its own track)
  kEvaluation,     // the epoch's evaluation (after a selected step)
  kCheckpoint,     // writing a checkpoint (rank 0, after a selected step)
  kGather,         // one unit's parameters gathered (reduce.shard "parameters"; on its unit's track)
  kGatherWait,     // waiting for a unit's gather before its forward or backward (the exposed part)
};

// The span's name in the trace file ("step", "zero_grad", "data", ...).
const char* span_name(SpanKind kind);

// One span, in nanoseconds since the trace's origin. Trivially copyable: the ranks send
// theirs to rank 0 as bytes.
struct TraceSpan {
  int64_t step;      // the step it belongs to (evaluation, checkpoint: the step before)
  int64_t begin_ns;
  int64_t end_ns;
  int64_t bytes;     // kReduction: the bucket's size; kGather: the unit's; else 0
  int32_t bucket;    // kReduction: the bucket's index; kGather: the unit's; else -1
  SpanKind kind;
};

class StepTrace final : public distributed::ReductionListener {
 public:
  using Clock = std::chrono::steady_clock;

  StepTrace() = default;  // off: selects no step
  explicit StepTrace(const config::TraceConfig& config);

  bool enabled() const { return enabled_; }
  // Whether `step` is one of trace.steps. One comparison: (step - first) as unsigned is
  // past the range for steps both before and after it.
  bool selects(int64_t step) const {
    return static_cast<uint64_t>(step - first_) < count_;
  }
  // Room for `steps` steps of at most `spans_per_step` spans each; call before the first
  // step. A span beyond it is dropped (and counted), never allocated.
  void reserve(int64_t steps, size_t spans_per_step);
  // Time 0 of the trace: every rank reads its clock right after one common barrier.
  void set_origin(Clock::time_point origin) { origin_ = origin; }
  // The reduction's path for the bucket spans' arguments: "mpi", "shm" or "two-level".
  // On the shared-memory paths the ranks sum inside the wait, so a bucket's span starts there.
  void set_reduction_path(const std::string& path, bool sums_in_wait);
  // The step the following spans belong to.
  void begin_step(int64_t step) { step_ = step; }

  void add(SpanKind kind, Clock::time_point begin, Clock::time_point end);
  void bucket_reduced(const distributed::BucketTiming& timing) override;
  // A unit's parameters, `bytes` of them, gathered from `started` to the return of its wait.
  void unit_gathered(size_t unit, size_t bytes, Clock::time_point started, Clock::time_point done);

  // The spans recorded so far (a copy, for the end of the run).
  std::vector<TraceSpan> spans() const {
    return {spans_.begin(), spans_.begin() + static_cast<std::ptrdiff_t>(used_)};
  }
  int64_t dropped() const { return dropped_; }
  const std::string& reduction_path() const { return reduction_path_; }

 private:
  void push(const TraceSpan& span);
  int64_t since_origin(Clock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - origin_).count();
  }

  bool enabled_ = false;
  int64_t first_ = 1;
  uint64_t count_ = 0;  // selected steps: [first_, first_ + count_)
  Clock::time_point origin_{};
  std::string reduction_path_ = "none";
  bool sums_in_wait_ = false;
  int64_t step_ = 0;
  // Written through once by reserve(), so that no page of it faults in during a step
  // (a first touch costs microseconds, as much as a small step's phase).
  std::vector<TraceSpan> spans_;
  size_t used_ = 0;
  int64_t dropped_ = 0;
};

}  // namespace mpiddp::record
