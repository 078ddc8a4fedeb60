#pragma once
// A launcher's restart of a run whose attempt failed or was interrupted (launch/mpirun.sh
// --max-restarts, launch/slurm.sbatch's requeue): what the launcher passes to
// `mpiddp train --restart JSON`, and which records of the previous attempt's log the new
// attempt's log carries on, so that one log holds the whole run (docs/log-format.md).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"

namespace mpiddp::checkpoint {

struct RestartInfo {
  int64_t attempt = 1;                          // 1 for the first restart
  std::optional<int64_t> exit_code;             // the previous attempt's, as the launcher saw it
  std::optional<int64_t> previous_world_size;   // the previous attempt's ranks
  std::string reason;                           // the launcher's words, free text
};

// --restart '{"attempt":2,"exit_code":137,"previous_world_size":2,"reason":"..."}'; only
// attempt is required. A ConfigError names "--restart" and the key.
RestartInfo parse_restart_info(const std::string& text);

// The lines of the log at `path` that precede `resume_at`, the position the new attempt
// resumes from: its run record and every record of the steps up to resume_at.step and of
// the epochs before resume_at.epoch, verbatim; the end record and everything of later steps
// (which the new attempt redoes) are dropped, and so is a last line cut short. Empty when
// the file is missing or does not start with a run record.
std::vector<std::string> log_lines_until(const std::string& path, const TrainingPosition& resume_at);

}  // namespace mpiddp::checkpoint
