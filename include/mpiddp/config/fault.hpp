#pragma once
// What the trainer does when something goes wrong on some rank, and the fault injection
// used to test it. docs/reliability.md describes every fault, what the user sees, and the
// test that covers it.
#include <cstdint>
#include <string>

#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::config {

// debug.*: a testing aid. Makes one rank fail in a chosen way at a chosen step, so the
// end-to-end tests can check that the whole job reacts correctly.
struct FaultInjection {
  int64_t rank = -1;          // debug.fail_rank: -1 = no injection
  int64_t step = 1;           // debug.fail_step: 1-based optimizer step; 0 = during setup
  int64_t count = 1;          // debug.fail_count: consecutive steps that fail (nan, huge, perturb)
  // debug.fail_kind: throw | nan | huge | stall | exit | kill | signal | perturb | mismatch, or
  // a kill -9 of the rank writing checkpoints (0) at a point of the first checkpoint write at
  // or after fail_step: kill_writing_checkpoint / kill_writing_best (the temporary file of the
  // next checkpoint / of the best one complete, before its rename), kill_pruning (the new
  // checkpoint in place, before the ones beyond checkpoint.keep are deleted)
  std::string kind = "throw";
  double stall_s = 0.0;       // debug.stall_s: how long "stall" sleeps; 0 = forever

  bool enabled() const { return rank >= 0; }
  // True when injection is on and this step is one of the failing ones.
  bool in_window(int64_t at_step) const {
    return enabled() && at_step >= step && at_step < step + count;
  }
  // True when this rank injects a fault of this kind at this step.
  bool fires(int my_rank, int64_t at_step, const char* of_kind) const {
    return rank == my_rank && kind == of_kind && in_window(at_step);
  }
};

struct FaultConfig {
  std::string on_nonfinite = "abort";  // abort | skip
  int64_t max_skipped = 10;            // skip: abort when more steps than this in a row fail
  std::string divergence_action = "abort";  // divergence.action: abort | resync
  double watchdog_timeout_s = 300.0;   // watchdog.timeout_s: 0 = off
  std::string watchdog_action = "abort";    // watchdog.action: abort | warn
  FaultInjection inject;
  std::string flight_dir;  // debug.flight_dir: where the flight recorder files go; "": next to the log
};

// Reads on_nonfinite, max_skipped and the divergence, watchdog and debug sections of the
// config root; a ConfigError names the key.
FaultConfig parse_fault_config(io::JsonSection& root);

}  // namespace mpiddp::config
