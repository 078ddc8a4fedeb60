#pragma once
// The figure of `mpiddp timeline`: a Chrome trace file (as `mpiddp train --trace` writes it,
// docs/log-format.md) drawn as one row per rank and track, each complete ("X") span a bar
// coloured by its kind, spans inside others inset within them, against a common time axis.
// Time a rank spends waiting for the others (reduction_wait) is drawn in red, the one
// strong colour, so the ranks that hold up a step stand out.
#include <string>
#include <vector>

namespace mpiddp::analysis {

struct TimelineSpan {
  double begin_us, end_us;
  std::string kind;  // the event's "cat", else its "name"
};

struct TimelineTrack {
  int tid = 0;
  std::string name;
  std::vector<TimelineSpan> spans;  // sorted by start, enclosing spans first
};

struct TimelineProcess {
  int pid = 0;
  std::string name;
  std::vector<TimelineTrack> tracks;  // by tid
};

struct Timeline {
  std::string title;
  std::vector<TimelineProcess> processes;  // by pid
};

// Reads a trace file. A DataError names the file when it cannot be read, is not JSON, is
// not a trace (neither {"traceEvents": [...]} nor a list of events) or holds no X spans.
Timeline read_timeline(const std::string& path);

// The SVG document. Groups: "timeline" (the rows, one group "rank-PID" per process),
// "time-axis" and "legend".
std::string timeline_svg(const Timeline& timeline);

}  // namespace mpiddp::analysis
