#pragma once
// Checkpoints: one safetensors file per checkpoint, "<dir>/step-<step, 12 digits>.safetensors",
// written by rank 0 atomically (io/atomic_file.hpp), so a checkpoint exists only once it
// is complete. docs/checkpoints.md describes the format and the resume rules.
//
//   tensors:   the parameters under their PyTorch names ("0.weight", "0.bias", ...), so the
//              file also loads as init.weights or in PyTorch; each optimizer state buffer
//              laid out like them as "optimizer.<buffer>.<name>" (momentum_buffer, exp_avg, ...)
//   metadata:  "mpiddp_checkpoint": a JSON text with the position (epoch, batch, step), the
//              optimizer step count, the model and dtype, the resume-relevant config and its
//              hash, the batch geometry, the RNG description and a checksum of the data section
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mpiddp/io/safetensors.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/update_rule.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::checkpoint {

// Where training continues.
struct TrainingPosition {
  int64_t epoch = 1;  // the epoch to run (1-based)
  int64_t batch = 0;  // batches of that epoch already done
  int64_t step = 0;   // optimizer steps taken so far
  // The evaluations' trackers at this position (train/improvement.hpp: the best value of
  // checkpoint.keep_best's and early_stopping's metrics, and evaluations since), so that a
  // resumed run keeps and stops as the uninterrupted one; null before they exist.
  io::Json evaluations = nullptr;
};

// What a checkpoint must agree with to be resumed by this run.
struct RunIdentity {
  std::string model;  // nn::Model::describe()
  std::string dtype;
  io::Json config;        // resume_config()
  Index global_batch = 0;
  Index train_samples = 0;
  int64_t steps_per_epoch = 0;
  int world_size = 1;  // recorded only: another world size may resume
  std::string vocabulary;  // the text source's (checkpoint/vocabulary.hpp), or ""
};

// The resolved config less the keys a resumed run may change: epochs (unless a cosine
// schedule with t_max 0 spans the whole run), log, checkpoint, save_weights, init (the
// parameters come from the checkpoint), check_every_steps and the residuals' recompute.
// See docs/checkpoints.md.
io::Json resume_config(const config::Config& config);

// "<dir>/step-000000000016.safetensors"
std::string checkpoint_path(const std::string& dir, int64_t step);
// "<dir>/best": the checkpoint of the best evaluation (checkpoint.keep_best). Never one of
// list_checkpoints', so keeping the newest K never deletes it.
std::string best_checkpoint_path(const std::string& dir);
// The complete checkpoints in dir (files, and directories of checkpoints in parts whose index
// has landed), oldest first; temporary files of an interrupted write
// are not checkpoints and are skipped.
std::vector<std::string> list_checkpoints(const std::string& dir);
// Removes the temporary files of checkpoint writes that a killed run left in dir
// (".step-*.safetensors.tmp", io::temporary_name) and, of checkpoints in parts
// (checkpoint_parts.hpp), the directories whose index never landed and the files their index
// does not name; returns their names. Rank 0, at start: no other writer is running then.
std::vector<std::string> remove_stale_temporaries(const std::string& dir);
// --resume PATH|latest|best|auto: "latest" is the newest checkpoint in checkpoint_dir, "best"
// its best one, a checkpoint in parts is itself, another directory means its newest
// checkpoint, anything else is taken as a file.
// Error(kExitCheckpoint) when there is none. "auto" is "latest" when checkpoint_dir holds a
// checkpoint, and "" (start from the beginning) when it holds none or is "".
std::string resolve_resume_path(const std::string& spec, const std::string& checkpoint_dir);

// Where a crash test kills a checkpoint write (debug.fail_kind, config/fault.hpp): once the
// new file's temporary copy is complete and synced, before its rename; and once it is in
// place, before the checkpoints beyond checkpoint.keep are deleted.
struct WriteProbes {
  std::function<void()> before_rename;
  std::function<void()> before_pruning;
};

// Rank 0: writes the checkpoint of `position`, then removes the oldest beyond keep.
// Returns its path.
template <typename T>
std::string write_checkpoint(const config::CheckpointConfig& settings, const TrainingPosition& position,
                             const RunIdentity& identity, const nn::Model<T>& model,
                             optim::UpdateRule<T>& optimizer, const WriteProbes& probes = {});
// Rank 0: writes the checkpoint of `position` as best_checkpoint_path(settings.dir), over the
// previous best in one rename. Returns its path.
template <typename T>
std::string write_best_checkpoint(const config::CheckpointConfig& settings, const TrainingPosition& position,
                                  const RunIdentity& identity, const nn::Model<T>& model,
                                  optim::UpdateRule<T>& optimizer, const WriteProbes& probes = {});

// Removes a checkpoint of either format (nothing when there is none). Rank 0.
void remove_checkpoint(const std::string& path);
// Removes the oldest checkpoints of settings.dir beyond the newest settings.keep (0: none), in
// either format (a checkpoint in parts is a directory). Rank 0.
void prune_checkpoints(const config::CheckpointConfig& settings);

// Validates a checkpoint against this run (integrity, model, dtype, config, batch geometry)
// and restores the parameters and optimizer state. Error(kExitCheckpoint) says which check
// failed and why. `optimizer` holds the state of the parameters from `state_begin` on: all P
// (0), or a part of them (a rank's under reduce.shard "parameters", the model's part), whose
// slices alone are read.
template <typename T>
TrainingPosition restore_checkpoint(const io::SafetensorsFile& file, const RunIdentity& identity,
                                    nn::Model<T>& model, optim::UpdateRule<T>& optimizer, Index state_begin = 0);

// mpiddp export: writes a checkpoint's parameters alone (no optimizer tensors), with their
// names, shapes and dtype, as a weights file for init.weights or PyTorch's load_state_dict.
// Returns the number of tensors written. Error(kExitCheckpoint) when `checkpoint` is not one.
size_t export_checkpoint_weights(const std::string& checkpoint, const std::string& weights);

// Whether a checkpoint is due after a step that leaves the epoch unfinished, and after an
// epoch ends (the last epoch always gets one, so a finished run can be extended).
bool checkpoint_due_mid_epoch(const config::CheckpointConfig& settings, int64_t step);
bool checkpoint_due_after_epoch(const config::CheckpointConfig& settings, int64_t epoch, int64_t step,
                                bool last_epoch);

}  // namespace mpiddp::checkpoint
