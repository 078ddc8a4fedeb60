#pragma once
// The trainer's persistence, as one part: where a run's parameters and optimizer state come
// from (a checkpoint, init.weights or the seed), and what it writes (the checkpoint series,
// the best checkpoint, the interrupt's checkpoint, the final weights and their average).
// Rank 0 writes; the collectives it needs (the optimizer's parts gathered to rank 0, rank 0's
// outcome shared) are every rank's.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/optimizer.hpp"
#include "mpiddp/record/run_log_writer.hpp"
#include "mpiddp/record/step_observer.hpp"

namespace mpiddp::train {

template <typename T>
class Checkpointer {
 public:
  // All given outlives it but identity, what a checkpoint must match to be resumed (the
  // model, the batch, the data: fixed by setup). log: rank 0's run log (a disabled writer
  // elsewhere). Local.
  Checkpointer(const config::Config& config, distributed::Communicator& comm, nn::Model<T>& model,
               optim::Optimizer<T>& optimizer, record::StepObserver& observer, record::RunLogWriter& log,
               checkpoint::RunIdentity identity);

  // Where the parameters and optimizer state come from: the checkpoint `resume` names
  // (--resume: "latest", "auto", a checkpoint or a directory; "" starts afresh), else
  // init.weights, else the seed; removes a killed write's temporary files first. Returns where
  // the run starts. Collective.
  checkpoint::TrainingPosition initial_state(const std::string& resume);
  // The checkpoint's path this run resumed from; "" when it started afresh.
  const std::string& resumed_from() const { return resumed_from_; }

  // The checkpoint of `position` (its evaluations filled in): the next in the series, or with
  // best ({"metric", "value"} for its record) the best one (checkpoint.keep_best). Every rank
  // calls it (collective when the optimizer is sharded); rank 0 writes.
  void save(const checkpoint::TrainingPosition& position, const std::optional<io::Json>& best = std::nullopt);
  // The interrupt's checkpoint of `position`, unless the series' last one is already there
  // (or checkpoint.dir is unset): rank 0 writes, and its outcome is every rank's (an error on
  // every rank if it failed). Collective.
  void save_at_interrupt(const checkpoint::TrainingPosition& position);
  // save_weights (and the weights' average beside it with ema.decay). Collective when the
  // optimizer is sharded.
  void save_final_weights();
  // The path of the series' checkpoint of `step`, in checkpoint.format's form.
  std::string series_path(int64_t step) const;

 private:
  // checkpoint.format "parts" (checkpoint/checkpoint_parts.hpp), else one file.
  bool in_parts() const;
  // Restoring resumed_from_, a file or a checkpoint in parts. Collective.
  checkpoint::TrainingPosition restore_file();
  checkpoint::TrainingPosition restore_parts();
  // Rank 0's part: the file from the whole optimizer state, and its log record.
  void write_file(const checkpoint::TrainingPosition& position, optim::UpdateRule<T>& whole,
                  std::chrono::steady_clock::time_point start, const std::optional<io::Json>& best);
  // The checkpoint in parts of `position`: every rank's part, then rank 0's index, and the
  // log record. Collective; a failure anywhere is every rank's.
  void write_parts(const checkpoint::TrainingPosition& position, std::chrono::steady_clock::time_point start,
                   const std::optional<io::Json>& best);
  // The elements of the flat parameter buffer whose state this rank writes in parts.
  std::pair<Index, Index> part_range() const;
  // The checkpoint's trace span and log record.
  void record_written(const std::string& path, const checkpoint::TrainingPosition& position,
                      std::chrono::steady_clock::time_point start, const std::optional<io::Json>& best);

  const config::Config& config_;
  distributed::Communicator& comm_;
  nn::Model<T>& model_;
  optim::Optimizer<T>& optimizer_;
  record::StepObserver& observer_;
  record::RunLogWriter& log_;
  checkpoint::RunIdentity identity_;
  std::string resumed_from_;           // the checkpoint's path, when resuming
  int64_t last_checkpoint_step_ = -1;  // the step of the series' last checkpoint, -1: none
};

}  // namespace mpiddp::train
