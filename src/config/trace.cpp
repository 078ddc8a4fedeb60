#include "mpiddp/config/trace.hpp"

#include "mpiddp/core/error.hpp"

namespace mpiddp::config {

TraceConfig parse_trace_config(io::JsonSection& root) {
  TraceConfig t;
  auto trace = root.section("trace");
  t.path = trace.text("path", "");
  if (const io::Json* steps = trace.raw("steps")) {
    const bool pair = steps->is_array() && steps->size() == 2 && (*steps)[0].is_number_integer() &&
                      (*steps)[1].is_number_integer();
    if (!pair)
      throw ConfigError("trace.steps", "expected [FIRST, LAST], two step numbers like [2, 21]");
    t.first_step = (*steps)[0].get<int64_t>();
    t.last_step = (*steps)[1].get<int64_t>();
    if (t.first_step < 1 || t.last_step < t.first_step)
      throw ConfigError("trace.steps", "expected 1 <= FIRST <= LAST (steps count from 1), got [" +
                                           std::to_string(t.first_step) + ", " +
                                           std::to_string(t.last_step) + "]");
    if (t.last_step - t.first_step >= kMaxTracedSteps)
      throw ConfigError("trace.steps", "at most " + std::to_string(kMaxTracedSteps) +
                                           " steps: a larger trace would not open in a viewer");
    if (t.path.empty())
      throw ConfigError("trace.steps", "a trace needs a file to go to; set trace.path (or --trace)");
  }
  trace.put("steps", io::Json::array({t.first_step, t.last_step}));
  trace.finish();
  return t;
}

}  // namespace mpiddp::config
