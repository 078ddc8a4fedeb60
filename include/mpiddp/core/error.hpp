#pragma once
// Error types and the process exit codes they map to. Each class of failure has its own
// exit code so scripts can tell a bad config from a bad data file from a diverged run.
#include <stdexcept>
#include <string>

namespace mpiddp {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailure = 1,      // a runtime failure without a more specific class
  kExitConfig = 2,       // bad config key, type or value; bad command line
  kExitData = 3,         // unreadable or malformed input file
  kExitDivergence = 4,   // replicas no longer bit-identical while sync is on
  kExitNonFinite = 5,    // NaN or Inf in loss or gradients
  kExitCheckpoint = 6,   // checkpoint missing, corrupt or incompatible
  kExitWatchdog = 7,     // a collective waited longer than watchdog.timeout_s
  kExitOutput = 8,       // an output file or directory could not be written
  kExitInterrupted = 9,  // stopped by SIGTERM, SIGINT or SIGUSR1 after writing a checkpoint
  kExitCpu = 10,         // the CPU lacks an instruction set this build was compiled for
};

// Whether every rank raises the error identically (a bad config, a failed collective check)
// or only some ranks do (a file one rank cannot read). The first kind can end the job
// cleanly on every rank; the second must abort it, or the other ranks wait forever.
enum class Scope { kThisRank, kEveryRank };

// An error with the exit code it should end the process with.
class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message, Scope scope = Scope::kThisRank)
      : std::runtime_error(message), code_(code), scope_(scope) {}
  ExitCode code() const { return code_; }
  bool on_every_rank() const { return scope_ == Scope::kEveryRank; }

 private:
  ExitCode code_;
  Scope scope_;
};

// A config error names the key path ("optimizer.lr") and what was expected.
class ConfigError : public Error {
 public:
  // Every rank parses the same config, so every rank raises the same ConfigError.
  ConfigError(const std::string& key_path, const std::string& problem)
      : Error(kExitConfig, "config: " + key_path + ": " + problem, Scope::kEveryRank),
        key_path_(key_path) {}
  const std::string& key_path() const { return key_path_; }

 private:
  std::string key_path_;
};

class DataError : public Error {
 public:
  explicit DataError(const std::string& message) : Error(kExitData, message) {}
};

}  // namespace mpiddp
