#pragma once
// The gradient reducer: the one place where gradients are combined across ranks.
//
// Blocking use: reduce(grads, count). Overlapped use, during backward:
//   begin(grads, count);        // before backward; the buffer's tail may already be final
//   ready_from(offset);         // backward has finished every gradient from offset on
//   ...
//   finish();                   // after backward: every rank holds the mean over ranks
// Buckets (bucket_plan.hpp) are started in the same fixed order on every rank.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mpiddp/distributed/bucket_plan.hpp"
#include "mpiddp/distributed/communicator.hpp"

namespace mpiddp::distributed {

// The config's "reduce" section (docs/config.md).
struct ReduceConfig {
  std::string algorithm = "auto";  // mpi | shm | auto (see ReduceAlgorithm)
  double bucket_cap_mb = 25.0;     // MiB per bucket, as PyTorch DDP's bucket_cap_mb
  double first_bucket_mb = 1.0;    // MiB, the smaller first bucket
  bool overlap = true;             // start buckets during backward
  std::string compress = "none";   // none | bf16: the sum between nodes (compression.hpp)
  // ZeRO-1: each rank of a node (with one rank per node: of the world) keeps and applies the
  // optimizer to its part of the parameters only (optim/optimizer.hpp). reduce.shard
  // "optimizer", or its older spelling reduce.shard_optimizer true; "gradients" too.
  bool shard_optimizer = false;
  // ZeRO-2: each rank keeps its part of the averaged gradient alone, and of the optimizer's
  // state (shard_optimizer is then true): reduce.shard "gradients", the step
  // train/sharded_gradients_step.hpp.
  bool shard_gradients = false;
  // ZeRO-3: each rank keeps its part of the parameters alone too (shard_gradients is then
  // true): reduce.shard "parameters", the step train/sharded_parameters_step.hpp, gathering
  // the parameters a unit at a time, the unit being reduce.shard_unit's ("block").
  bool shard_parameters = false;
  std::string shard_unit = "block";

  // The three flags for reduce.shard `mode` ("none", "optimizer", "gradients" or
  // "parameters"), each mode sharding what the one before it does, and more.
  void set_shard(const std::string& mode) {
    shard_optimizer = mode != "none";
    shard_gradients = mode == "gradients" || mode == "parameters";
    shard_parameters = mode == "parameters";
  }
};

// When one bucket's reduction was started, waited for and known done (the wait returned),
// for the step trace (record/step_trace.hpp).
struct BucketTiming {
  size_t bucket;  // index in buckets()
  size_t bytes;
  std::chrono::steady_clock::time_point started, waited, done;
};

// Told about each bucket once its reduction is done. Null (the default): the reducer reads
// no clock at all.
class ReductionListener {
 public:
  virtual ~ReductionListener() = default;
  virtual void bucket_reduced(const BucketTiming& timing) = 0;
};

ReduceAlgorithm parse_reduce_algorithm(const std::string& name);
std::string to_string(ReduceAlgorithm algorithm);

template <typename T>
class GradientReducer {
 public:
  explicit GradientReducer(Communicator& comm, const ReduceConfig& config = {});

  // Element offsets where the buffer's tensors begin (ascending), so buckets keep tensors
  // whole. Without them a buffer is one tensor, cut only at the caps.
  void set_tensor_begins(std::vector<size_t> begins);
  // Elements from offset on are summed uncompressed whatever reduce.compress says: the
  // trainer's loss slot, which is reported and checked for divergence and would keep only
  // 3 digits in bf16. The bucket holding offset is then sent as two sums.
  void keep_exact_from(size_t offset) { exact_from_ = offset; }
  // From now on each rank needs only its own part of the summed buffer: part
  // p = Communicator::world_part(), [begins[p], begins[p + 1]) (begins: size + 1 element
  // offsets, begins.back() the buffer's count), the rest left undefined
  // (Communicator::start_scattered_sum). For the optimizer sharded across the world. Not with
  // compression; with several ranks on a node, only on the shm path, where the buffer is
  // then one bucket (Note [one scattered sum on a node] in gradient_reducer.cpp).
  void scatter_into_parts(std::vector<size_t> begins);
  bool scatters() const { return !part_begins_.empty(); }

  // Memory for a gradient buffer of count elements that this reducer sums where it lies
  // (the shared-memory path), or null when its path gains nothing from that. Collective.
  T* allocate_shared_buffer(size_t count);
  // The node's one copy of count values at data (Communicator::share_on_node) on the same
  // path, or null. Collective.
  T* share_on_node(const T* data, size_t count);
  // This reducer's path shares memory among the ranks of a node (kShm, several ranks there):
  // where share_on_node gives a node copy.
  bool shares_node_memory() const;

  // grads: (count) flat, in place. Afterwards every rank holds the mean over ranks (of its
  // own part, when scatters()).
  void reduce(T* grads, size_t count);

  // The overlapped form of reduce (see the top of this file).
  void begin(T* grads, size_t count);
  void ready_from(size_t offset);
  void finish();
  // After finish(): whether every value of the summed buffer is finite, alike on every rank,
  // when the sums checked them as they computed them (Note [the finite check in the sum] in
  // src/distributed/mpi_shared_memory_sum.cpp): one allreduce of a flag instead of a scan of
  // the buffer. nullopt when they could not tell: the caller scans. Collective.
  std::optional<bool> agreed_finite();

  // ZeRO-2's sum of one unit of the gradients as backward makes them (Note [gradients staged
  // by unit] in train/gradient_staging.hpp): data, begins.back() values, summed over the ranks
  // and scaled to their mean, rank r ending with part p = Communicator::world_part(),
  // [begins[p], begins[p + 1]) of data, only (Communicator::start_scattered_sum; with several
  // ranks on a node data must lie in allocate_shared_buffer's memory). begins must stay alive
  // and unchanged until wait_unit_sum. Every rank starts the same unit sums in the same order.
  // With one rank: nothing to do (handle -1).
  int start_unit_sum(T* data, const std::vector<size_t>& begins);
  // Waits for a unit sum; the listener hears it as bucket `unit` of `bytes`.
  void wait_unit_sum(int handle, size_t unit, size_t bytes);
  // Lets started sums advance (Communicator::progress), between layers of backward.
  void progress();

  // The bucket timings of the following reductions go to listener (null: none).
  void set_listener(ReductionListener* listener) { listener_ = listener; }

  ReduceAlgorithm algorithm() const { return algorithm_; }
  // How many buckets a buffer of count elements is cut into (the plan begin() makes).
  size_t bucket_count(size_t count) const { return plan(count).size(); }
  // The compression the sums use, and why a requested one is not used (empty if it is).
  Compression compression() const { return compression_.applied; }
  const std::string& compression_note() const { return compression_.note; }
  // The plan of the last begin() / reduce().
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void start_ready_buckets(size_t ready_offset);
  // 1/N: Note [why divide by the world size here].
  double mean_scale() const;
  std::vector<Bucket> plan(size_t count) const;

  Communicator& comm_;
  ReduceConfig config_;
  ReduceAlgorithm algorithm_;
  CompressionChoice compression_;
  std::vector<size_t> tensor_begins_;
  // The plan for (planned_for_, planned_count_), recomputed only when those change.
  std::vector<Bucket> buckets_;
  const T* planned_for_ = nullptr;
  size_t planned_count_ = 0;
  std::vector<size_t> part_begins_;                // scatter_into_parts, else empty
  std::vector<std::vector<size_t>> bucket_parts_;  // (buckets) the parts within each bucket
  // The reduction in flight.
  T* grads_ = nullptr;
  size_t started_ = 0;        // buckets_[0, started_) have been started
  std::vector<int> handles_;  // (buckets) their handles
  ReductionListener* listener_ = nullptr;
  std::vector<std::chrono::steady_clock::time_point> started_at_;  // (buckets), with a listener
  std::vector<std::chrono::steady_clock::time_point> unit_started_at_;  // (handles), with a listener
  size_t exact_from_ = SIZE_MAX;
  int exact_handle_ = -1;     // the uncompressed part of the bucket holding exact_from_
};

}  // namespace mpiddp::distributed
