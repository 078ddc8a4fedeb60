#pragma once
// Reading the flight recorder's files (one per rank, src/distributed/flight_recorder.cpp) and
// finding where the ranks first disagree, for `mpiddp flight`. See docs/reliability.md.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mpiddp::analysis {

// One collective of a rank's ring, as read from its file.
struct FlightRecord {
  int64_t seq = 0;
  std::string kind;  // collective_key: "allreduce_sum_float", "barrier", ...
  int64_t bytes = 0;
  int64_t step = 0;
  int64_t start_us = 0;              // wall clock, microseconds since the Unix epoch
  std::optional<int64_t> end_us;     // empty: the rank was inside it when the file was written
  bool open() const { return !end_us.has_value(); }
};

struct FlightFile {
  std::string path;
  int rank = 0;
  int size = 1;
  int64_t step = 0;          // the step the rank had published
  std::string reason;        // why the file was written
  int64_t written_us = 0;
  std::vector<FlightRecord> records;  // by increasing seq
};

// Reads and validates one file. Error(kExitConfig) names the file and what is wrong.
FlightFile read_flight_file(const std::string& path);
// The same for text already in memory (tests); path names it in errors.
FlightFile parse_flight_file(const std::string& text, const std::string& path);

enum class FlightVerdict {
  kAgree,        // every rank at the same point, none inside a collective
  kAllWaiting,   // every rank inside the same collective: the MPI library or network stuck
  kMissing,      // some rank wrote no file (killed, or it could not write)
  kMismatch,     // the same collective number with different kinds or byte counts
  kProgress,     // some ranks are further on than others
};
const char* verdict_name(FlightVerdict v);

struct FlightAnalysis {
  int world_size = 0;
  std::vector<int> missing;  // ranks with no file among those given
  FlightVerdict verdict = FlightVerdict::kAgree;
  int64_t seq = 0;         // the collective where they first disagree (or all wait)
  std::vector<int> ranks;  // the ranks named as the cause: missing, odd one out, or lagging
  std::string summary;     // "rank 1 is in allreduce_sum_float #4812 at step 801; rank 0 ..."
};

// Aligns the files by collective number and finds the first point where they disagree: the
// earliest collective that ranks recorded with different kinds or byte counts, or the first
// one that some ranks reached and others did not. Needs files of distinct ranks of one job
// (the same world size); Error(kExitConfig) otherwise.
FlightAnalysis analyse_flight(const std::vector<FlightFile>& files);

// The rings side by side: one row per collective number, one column per rank (in rank
// order, missing ranks included), the row of `mark_seq` marked.
std::string flight_table(const std::vector<FlightFile>& files, int world_size, int64_t mark_seq);

}  // namespace mpiddp::analysis
