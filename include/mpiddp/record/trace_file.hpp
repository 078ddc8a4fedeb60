#pragma once
// The trace file of `--trace`: every rank's spans (record/step_trace.hpp) merged by rank 0
// into one Chrome trace-event JSON file (docs/log-format.md), which Perfetto, chrome://tracing
// and `mpiddp timeline` open.
#include <string>
#include <vector>

#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/record/step_trace.hpp"
#include "mpiddp/config/trace.hpp"

namespace mpiddp::record {

// One rank's part of the file.
struct RankTrace {
  std::string host;
  std::string reduction_path;  // "mpi", "shm", "two-level" or "none"
  int64_t dropped = 0;         // spans that did not fit the reserved memory
  std::vector<TraceSpan> spans;
};

// The JSON document: per rank (pid = rank) its name, a "compute" track (tid 0) and one
// track per gradient bucket (tid 1 + bucket), then the spans as complete events ("X") with
// ts and dur in microseconds, each track's sorted by start (enclosing spans first).
std::string trace_json(const std::vector<RankTrace>& ranks, const config::TraceConfig& config);

// Whether rank 0 will be able to write the file: creates and removes its temporary name.
// Local; an Error(kExitOutput) names the file. Called in setup, before any step.
void check_trace_writable(const std::string& path);

// Collective: every rank's spans go to rank 0 (in one allgather of bytes), which writes
// the file atomically (io/atomic_file.hpp). A failure is every rank's Error(kExitOutput).
void write_trace(distributed::Communicator& comm, const StepTrace& trace, const config::TraceConfig& config);

}  // namespace mpiddp::record
