#include "mpiddp/record/step_trace.hpp"

namespace mpiddp::record {

const char* span_name(SpanKind kind) {
  switch (kind) {
    case SpanKind::kStep: return "step";
    case SpanKind::kZeroGradients: return "zero_grad";
    case SpanKind::kData: return "data";
    case SpanKind::kForward: return "forward";
    case SpanKind::kBackward: return "backward";
    case SpanKind::kReductionWait: return "reduction_wait";
    case SpanKind::kCheck: return "check";
    case SpanKind::kOptimizer: return "optimizer";
    case SpanKind::kReduction: return "reduction";
    case SpanKind::kEvaluation: return "evaluation";
    case SpanKind::kCheckpoint: return "checkpoint";
    case SpanKind::kGather: return "gather";
    case SpanKind::kGatherWait: return "gather_wait";
  }
  return "?";
}

StepTrace::StepTrace(const config::TraceConfig& config)
    : enabled_(!config.path.empty()), first_(config.first_step),
      count_(enabled_ ? static_cast<uint64_t>(config.last_step - config.first_step + 1) : 0) {}

void StepTrace::reserve(int64_t steps, size_t spans_per_step) {
  spans_.assign(static_cast<size_t>(steps > 0 ? steps : 0) * spans_per_step, TraceSpan{});
  used_ = 0;
}

void StepTrace::set_reduction_path(const std::string& path, bool sums_in_wait) {
  reduction_path_ = path;
  sums_in_wait_ = sums_in_wait;
}

void StepTrace::push(const TraceSpan& span) {
  // Nothing is allocated in a step: a span that does not fit is counted, and the file says
  // how many were dropped.
  if (used_ == spans_.size()) {
    ++dropped_;
    return;
  }
  spans_[used_++] = span;
}

void StepTrace::add(SpanKind kind, Clock::time_point begin, Clock::time_point end) {
  push({step_, since_origin(begin), since_origin(end), 0, -1, kind});
}

void StepTrace::bucket_reduced(const distributed::BucketTiming& timing) {
  // Over MPI the bucket is in flight from its start (during backward, when it overlaps) to
  // the return of its wait; the end is when this rank learnt it was done, at most that late.
  const Clock::time_point begin = sums_in_wait_ ? timing.waited : timing.started;
  push({step_, since_origin(begin), since_origin(timing.done), static_cast<int64_t>(timing.bytes),
        static_cast<int32_t>(timing.bucket), SpanKind::kReduction});
}

void StepTrace::unit_gathered(size_t unit, size_t bytes, Clock::time_point started, Clock::time_point done) {
  // As a bucket over MPI: in flight from its start (during the unit before it, when prefetched)
  // to the return of its wait.
  push({step_, since_origin(started), since_origin(done), static_cast<int64_t>(bytes), static_cast<int32_t>(unit),
        SpanKind::kGather});
}

}  // namespace mpiddp::record
