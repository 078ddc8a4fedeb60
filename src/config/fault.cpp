#include "mpiddp/config/fault.hpp"

#include <limits>

#include "mpiddp/core/error.hpp"

namespace mpiddp::config {

FaultConfig parse_fault_config(io::JsonSection& root) {
  FaultConfig f;
  f.on_nonfinite = root.choice("on_nonfinite", "abort", {"abort", "skip"});
  f.max_skipped = root.integer("max_skipped", 10, 0, io::kMaxConfigCount);
  {
    auto divergence = root.section("divergence");
    f.divergence_action = divergence.choice("action", "abort", {"abort", "resync"});
    divergence.finish();
  }
  {
    auto watchdog = root.section("watchdog");
    // A week is more than any collective should wait; the bound keeps the arithmetic sane.
    f.watchdog_timeout_s = watchdog.number("timeout_s", 300.0, 0.0, 7 * 24 * 3600.0);
    f.watchdog_action = watchdog.choice("action", "abort", {"abort", "warn"});
    watchdog.finish();
  }
  {
    auto debug = root.section("debug");
    auto& inject = f.inject;
    inject.rank = debug.integer("fail_rank", -1, -1, std::numeric_limits<int>::max());
    inject.step = debug.integer("fail_step", 1, 0, io::kMaxConfigCount);
    inject.count = debug.integer("fail_count", 1, 1, io::kMaxConfigCount);
    inject.kind = debug.choice("fail_kind", "throw",
                               {"throw", "nan", "huge", "stall", "exit", "kill", "signal", "perturb", "mismatch",
                                "kill_writing_checkpoint", "kill_writing_best", "kill_pruning"});
    inject.stall_s = debug.number("stall_s", 0.0, 0.0, 7 * 24 * 3600.0);
    f.flight_dir = debug.text("flight_dir", "");
    debug.finish();
    if (inject.enabled() && inject.step == 0 && inject.kind != "throw" && inject.kind != "exit" &&
        inject.kind != "stall")
      throw ConfigError("debug.fail_step", "step 0 (setup) only supports fail_kind throw, exit "
                                           "or stall");
  }
  return f;
}

}  // namespace mpiddp::config
