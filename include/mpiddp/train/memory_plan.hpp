#pragma once
// What one rank will hold, by kind, known before any of it is allocated: the need that
// memory.limit_mb is checked against before the model exists, that the run record states
// ("memory") and that `mpiddp bench` reports (needed_mb, needed_mb_by_kind, and per
// reduce.shard mode). A run that cannot fit then ends with exit 2 at start, naming the key,
// the need and the limit, rather than by the kernel's OOM killer in the middle of an epoch.
#include <string>

#include "mpiddp/config/config.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/part_exchange.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/optim/update_rule.hpp"

namespace mpiddp::train {

// Bytes one rank holds, by kind.
struct MemoryNeed {
  double parameters = 0.0;       // the parameters (every rank builds its own copy, also where
                                 // the node's ranks then share one; ZeRO-3: this rank's part and
                                 // the units gathered), and bf16's copies of them
  double gradients = 0.0;        // the gradient buffer with its reserved slots (ZeRO-2: this
                                 // rank's part and the staging), and the reducer's own buffers
  double optimizer_state = 0.0;  // the update rule's state (and ema's) of this rank's part, and
                                 // the whole, gathered on rank 0 for a checkpoint
  double activations = 0.0;      // the layers' scratch and transient memory, the output and its
                                 // gradient, and the gathered batches
  double data = 0.0;             // the training and evaluation sets, which every rank holds whole
  double step = 0.0;             // the step mode's own (step_working_bytes: deterministic mode's sums)
  double total() const { return parameters + gradients + optimizer_state + activations + data + step; }
};

// What the need follows from, known once the layers are parsed and the data loaded.
struct MemoryFacts {
  Index parameters = 0;        // P
  Index gradient_values = 0;   // P and the reserved slots
  size_t activation_bytes = 0; // nn::activation_bytes for the per-rank batch
  size_t batch_bytes = 0;      // one gathered batch of the per-rank size
  size_t data_bytes = 0;       // data::Dataset::bytes of the training and evaluation sets
  size_t weight_copy_bytes = 0;  // bf16 precision's copies of the weights (2 bytes each)
  double step_bytes = 0.0;     // step_working_bytes
  Index staging_values = 0;    // ZeRO-2's staging of the gradients, ZeRO-3's of the parameters (GradientStaging::values)
  size_t value_bytes = 4;      // sizeof(T)
};

// How the ranks cut, and move, what they hold.
struct MemoryLayout {
  int optimizer_parts = 1;  // the optimizer's state cut into (optim::Optimizer::parts)
  // Cut, and yet the whole state comes together: on rank 0 for a checkpoint or ema's weights
  // (optim::Optimizer::whole_on_rank0), counted on every rank so that every rank decides alike.
  bool gathers_whole_state = false;
  // The reducer's own buffers per gradient value: bf16's between nodes (2 bytes out and 2 in),
  // the scattered sum's receive buffer ((N - 1) / N values) where the world holds the parts.
  double reduction_bytes_per_value = 0.0;
  // reduce.shard "gradients": a rank holds its part of the gradient and the staging, not all
  // P (Note [gradients staged by unit] in train/gradient_staging.hpp).
  bool gradients_in_parts = false;
  // reduce.shard "parameters": the parameters likewise, their part and the units gathered
  // (Note [parameters gathered by unit] in train/sharded_parameters_step.hpp), not all P.
  bool parameters_in_parts = false;
  // With gradients_in_parts, deterministic mode's step: the part of the exact mean alone, no
  // staging (Note [the exact mean in parts]); its own working memory is the step's.
  bool gradient_part_only = false;
};

// The need of `facts` with the optimizer cut as `scope` on comm's ranks (compressed: bf16
// between nodes), for config's checkpoints and weights: memory_need with that layout. Local.
MemoryNeed memory_need_in_scope(const config::Config& config, distributed::Communicator& comm,
                                distributed::ShardScope scope, bool compressed, const MemoryFacts& facts);

// optimizer: the update rule's state per parameter (optim::state_values_per_parameter);
// prefetch: a second gathered batch beside the step's.
MemoryNeed memory_need(const optim::OptimizerConfig& optimizer, bool prefetch, const MemoryFacts& facts,
                       const MemoryLayout& layout);

// bytes / 2^20: the unit of memory.limit_mb and of every *_mb figure of memory.
double mebibytes(double bytes);

// {"needed_mb": total, "by_kind": {"parameters", "gradients", "optimizer_state",
// "activations", "data", "step"}} in MiB, with "limit_mb" when memory.limit_mb is set: the run
// record's "memory".
io::Json memory_record(const MemoryNeed& need, double limit_mb);

// memory.limit_mb (0: none) against the need: a ConfigError naming the key, the need by kind
// and the limit when the need is larger. `shardable`: several ranks, and the optimizer state
// not cut yet, so reduce.shard "optimizer" would divide it (the message says so).
void check_memory_limit(double limit_mb, const MemoryNeed& need, bool shardable);

}  // namespace mpiddp::train
