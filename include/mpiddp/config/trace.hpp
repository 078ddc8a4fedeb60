#pragma once
// The config's "trace" section: where the timeline of the training steps goes and which
// steps it holds (docs/config.md; the file's format is in docs/log-format.md).
#include <cstdint>
#include <string>

#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::config {

struct TraceConfig {
  std::string path;        // trace.path; "": no trace
  int64_t first_step = 2;  // trace.steps = [first, last], inclusive, 1-based optimizer steps:
  int64_t last_step = 21;  // step 1 warms up caches and pages, 20 steps keep a file small
};

// The most steps one trace may hold: at about 2 KB of JSON per step and rank, a larger file
// no longer opens in a browser's trace viewer.
constexpr int64_t kMaxTracedSteps = 100000;

// Reads root's "trace" section. A ConfigError names trace.steps or trace.path.
TraceConfig parse_trace_config(io::JsonSection& root);

}  // namespace mpiddp::config
