#pragma once
// The run's record (docs/log-format.md), as one part of the trainer: rank 0's log files, and the records that
// are the run's own rather than a part's: the `run` record that opens the log (or, for a
// launcher's restart, the previous attempt's records up to its checkpoint and then a `restart`
// record), the table's header on stdout, a `step` record every log.every_steps, the
// `interrupted` record and the `end` record. The checkpointer, the evaluator and the step guard
// write their own records through log(). The ranks other than 0 hold a log that writes nothing,
// so every rank calls the same methods.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/checkpoint/restart.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/distributed/part_exchange.hpp"
#include "mpiddp/distributed/reduction_levels.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/record/run_log_writer.hpp"

namespace mpiddp::record {

// What the `run` record says of this run, gathered by the trainer's start-up (some of it by
// collectives, which is why the record does not gather it itself).
struct RunFacts {
  std::string launcher;            // distributed::detect_launcher()
  std::vector<std::string> hosts;  // every rank's host, in rank order
  std::string model;               // the model's description
  int64_t parameters = 0;
  int64_t global_batch = 0;
  int threads = 1;
  io::Json gemm;  // gemm_record(): the products' library and why
  std::string reduce_algorithm;
  std::string reduce_compress;
  std::string reduce_compress_note;  // reduce.compress set where nothing crosses between nodes
  distributed::ShardScope shard_scope = distributed::ShardScope::kNone;
  distributed::ReductionLevels levels;
  io::Json step_description = io::Json::object();  // the step strategy's keys (its describe())
  io::Json memory;  // train::memory_record(): what a rank holds by kind, and memory.limit_mb
  std::optional<io::Json> resumed_from;            // resume_point(), when resumed
};

// {"path", "epoch", "batch", "step"} of the checkpoint a run resumed from.
io::Json resume_point(const std::string& path, const checkpoint::TrainingPosition& position);

// The `end` record's values.
struct RunEnd {
  int64_t steps = 0;
  std::string param_checksum;  // hex, as ReplicaReport::checksum
  bool replicas_identical = true;
  double max_replica_diff = 0.0;
  int64_t skipped_steps = 0;
  int64_t resyncs = 0;
  double time_s = 0.0;
};

class RunRecord {
 public:
  // Local: creates rank 0's log files (log.path, log.csv, log.tensorboard) now, before the
  // first step, so that an unwritable one is known at once. quiet: no table header on stdout;
  // restart: this run is a launcher's restart of an earlier attempt (--restart).
  RunRecord(const config::Config& config, const distributed::Communicator& comm, bool quiet,
            std::optional<checkpoint::RestartInfo> restart);

  // Rank 0's log, for the parts that write records of their own; a disabled one elsewhere.
  RunLogWriter& log() { return log_; }

  // The log's first records, and the table's header. position: where the run starts.
  void open(const RunFacts& facts, const checkpoint::TrainingPosition& position);
  // The step's record, every log.every_steps. grad_norm is recorded when clipping is on.
  void step(int64_t epoch, int64_t step, double loss, double lr, double seconds, double grad_norm);
  // written: the checkpoint's path, none without checkpoint.dir.
  void interrupted(int64_t epoch, int64_t step, const std::string& signal, const io::Json& ranks,
                   const std::optional<std::string>& written);
  void end(const RunEnd& end);

 private:
  io::Json run_record(const RunFacts& facts) const;

  const config::Config& config_;
  const distributed::Communicator& comm_;
  bool quiet_;
  std::optional<checkpoint::RestartInfo> restart_;
  RunLogWriter log_;
};

}  // namespace mpiddp::record
