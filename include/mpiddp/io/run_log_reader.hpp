#pragma once
// Reads a JSON Lines run log written by the trainer (docs/log-format.md) back into memory,
// for `mpiddp compare` and `mpiddp plot`. Records of kinds it does not know are skipped, so
// logs from newer builds that add record kinds still read.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::io {

struct StepRecord {
  int64_t epoch = 0;  // 1-based
  int64_t step = 0;   // optimizer steps from 1
  double loss = 0.0;  // global mean over the global batch
  double lr = 0.0;
};

struct EpochRecord {
  int64_t epoch = 0;
  double eval_loss = 0.0;
  std::optional<double> eval_accuracy;  // classification only
};

struct EndRecord {
  int64_t steps = 0;
  std::string param_checksum;
  bool replicas_identical = false;
  double max_replica_diff = 0.0;
};

struct RunLog {
  std::string path;
  int world_size = 0;
  Json config;                     // the resolved config of the run record
  std::string launcher;            // "" in logs written before the launcher was recorded
  std::vector<std::string> hosts;  // one per rank; empty in older logs
  std::vector<StepRecord> steps;   // in file order
  std::vector<EpochRecord> epochs;
  std::optional<EndRecord> end;    // absent when the run did not finish

  // config.dtype ("float32" when the run record has none).
  std::string dtype() const;
  // config.compute.precision ("float32" when the run record has none).
  std::string precision() const;
};

// Throws DataError naming the file (and line) when the file cannot be read, a line is not
// JSON, the first record is not a run record, or a record lacks a field it must have.
RunLog read_run_log(const std::string& path);

}  // namespace mpiddp::io
