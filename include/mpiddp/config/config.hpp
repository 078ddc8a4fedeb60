#pragma once
// The run configuration: parsed and validated in one place, before any MPI work.
// docs/config.md is the reference for every key.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/data/source.hpp"
#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/nn/loss_registry.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/optim/update_rule.hpp"
#include "mpiddp/optim/schedule.hpp"
#include "mpiddp/config/deterministic.hpp"
#include "mpiddp/config/evaluation.hpp"
#include "mpiddp/config/fault.hpp"
#include "mpiddp/config/trace.hpp"

namespace mpiddp::config {

using io::Json;

using DataSourceConfig = data::SourceConfig;

// checkpoint.*: see docs/checkpoints.md.
struct CheckpointConfig {
  std::string dir;           // "": no checkpoints
  int64_t every_epochs = 0;  // 0: not by epoch
  int64_t every_steps = 0;   // 0: not by step
  int64_t keep = 3;          // the newest K are kept; 0 keeps all
  // "": no best checkpoint; else a metric (config/evaluation.hpp) whose best evaluation's
  // checkpoint is kept as "<dir>/best", beside the newest `keep`
  std::string keep_best;
  // "file": one file per checkpoint, written by rank 0 from the whole state; "parts": a
  // directory per checkpoint, each rank writing its part of the parameters and of the
  // optimizer state, and an index naming every tensor's slices (checkpoint/checkpoint_parts.hpp)
  std::string format = "file";
};

struct Config {
  uint64_t seed = 0;
  std::string dtype = "float32";
  Index model_inputs = 0;         // model.inputs; 0: not set
  nn::Shape model_input_shape;    // model.input_shape; empty: not set
  std::vector<nn::LayerSpec> layers;
  bool batchnorm_sync = true;     // batchnorm.sync: statistics of the global batch
  nn::LossSpec loss;              // "loss": a registered loss type (nn/loss_registry.hpp)
  DataSourceConfig train_data;
  std::optional<DataSourceConfig> eval_data;
  bool shuffle = true;
  bool drop_last = false;
  Index batch_global = 0;    // exactly one of batch_global and batch_per_rank is set
  Index batch_per_rank = 0;
  optim::OptimizerConfig optimizer;
  optim::ScheduleConfig schedule;
  int64_t epochs = 4;
  bool sync = true;
  int64_t check_every_steps = 0;  // 0: check replicas at the end only
  FaultConfig faults;             // on_nonfinite, divergence, watchdog, debug
  std::string log_path;           // "": no JSON Lines file
  int64_t log_every_steps = 1;
  std::string log_csv;            // log.csv: the step and evaluation records as CSV; "": none
  std::string log_tensorboard;    // log.tensorboard: a directory of TensorBoard event files; "": none
  EvaluationConfig eval;          // eval.every_steps, eval.max_samples
  EarlyStoppingConfig early_stopping;
  TraceConfig trace;              // trace.path, trace.steps: the step timeline
  std::string init_weights;   // init.weights: a safetensors file; "": seeded initialisation
  std::string sampler_order;  // sampler.order: an .npy int64 [epochs, samples]; "": own order
  std::string save_weights;   // save_weights: final weights as safetensors; "": not written
  CheckpointConfig checkpoint;
  // Performance (docs/config.md, parsed by parse_performance in performance.cpp).
  int64_t threads = 0;           // compute threads per rank; 0: from cores and ranks per node
  bool prefetch = true;          // gather the next step's batch on a worker thread during this one
  int64_t accumulate_steps = 1;  // micro-batches per optimizer step (gradient accumulation)
  distributed::ReduceConfig reduce;
  // memory.limit_mb: what one rank may hold, in MiB (train/memory_plan.hpp); 0: no limit.
  double memory_limit_mb = 0.0;
  std::string gemm = "auto";     // compute.gemm: auto, or a library of kernels/gemm.hpp
  std::string isa = "auto";      // compute.isa: auto, or the highest kernel level (kernels/isa.hpp)
  std::string precision = "float32";  // compute.precision: float32, bf16, bf16_reference (kernels/precision.hpp)
  DeterministicConfig deterministic;  // "deterministic": the same bits at every world size

  io::Json resolved;  // the full resolved config, defaults filled in, as logged in the run record

  // Per-rank and global batch sizes for a world size; a ConfigError if they do not divide.
  Index per_rank_batch(int world_size) const;
  Index global_batch(int world_size) const;
};

// The model's per-sample input shape: model.input_shape, else (model.inputs), else the data's
// own shape (npy [N, C, H, W], IDX images) or (features). A ConfigError names model.input_shape
// when the data do not fit it (data_key names the data in the message); a model.inputs that
// does not match the data is the trainer's data check's to report, as for data.eval.
nn::Shape model_input_shape(const Config& config, const std::vector<Index>& data_shape,
                            Index data_features, const std::string& data_key);

// The built-in default experiment: 256 samples of synthetic_regression (6 features, noise
// 0.1); 6 -> linear 48 -> tanh -> linear 48 -> tanh -> linear 1; mse; sgd lr 0.03;
// global batch 64; 4 epochs; shuffle on.
io::Json default_experiment();

// Validates a user config and fills in the defaults. Throws ConfigError naming the key.
Config parse_config(const io::Json& user);

// The performance keys of the root section: threads, prefetch, accumulate_steps, "reduce",
// "memory" and "compute".
void parse_performance(io::JsonSection& root, Config& config);

// Applies "--set a.b.c=VALUE": VALUE is parsed as JSON when it is valid JSON, otherwise
// taken as a string. Intermediate objects are created; array elements are addressed by
// index ("model.layers.0.out=64"). Unknown keys are caught later by parse_config.
void apply_override(io::Json& user, const std::string& assignment);

// Reads a JSON config file; a ConfigError names the file and the line of a syntax error.
// At most 16 MiB are read.
io::Json read_config_file(const std::string& path);
// The same for text already in memory; origin names it in errors (the fuzz target's entry).
io::Json parse_config_text(const std::string& text, const std::string& origin);

// The key that turned the optimizer's sharding on, as the user wrote it, for messages:
// "reduce.shard", or its older spelling "reduce.shard_optimizer".
std::string shard_key_path(const Config& config);

// The hash every rank compares with rank 0's: the resolved config less the keys that
// may legitimately differ between ranks or runs (log.path).
uint64_t config_hash(const Config& config);

}  // namespace mpiddp::config
