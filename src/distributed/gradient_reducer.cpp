#include "mpiddp/distributed/gradient_reducer.hpp"

#include <algorithm>
#include <cassert>
#include <type_traits>

#include "mpiddp/core/error.hpp"

namespace mpiddp::distributed {

namespace {
constexpr double kMiB = 1024.0 * 1024.0;
}  // namespace

ReduceAlgorithm parse_reduce_algorithm(const std::string& name) {
  if (name == "mpi") return ReduceAlgorithm::kMpi;
  if (name == "shm") return ReduceAlgorithm::kShm;
  if (name == "auto") return ReduceAlgorithm::kAuto;
  throw ConfigError("reduce.algorithm", "unknown algorithm '" + name + "'; expected mpi, shm or auto");
}

std::string to_string(ReduceAlgorithm algorithm) {
  switch (algorithm) {
    case ReduceAlgorithm::kMpi: return "mpi";
    case ReduceAlgorithm::kShm: return "shm";
    case ReduceAlgorithm::kAuto: return "auto";
  }
  return "?";
}

template <typename T>
CompressionChoice choose_compression_for(const ReduceConfig& config, const Communicator& comm) {
  const Compression requested = parse_compression(config.compress);
  // A float64 model is chosen for its precision (the equivalence checks, the golden
  // files); bf16 would throw away 45 of its 53 bits. Refused on any layout, so that a
  // config is valid or not whatever the number of nodes.
  if (std::is_same_v<T, double> && requested != Compression::kNone)
    throw ConfigError("reduce.compress", "\"bf16\" needs dtype \"float32\"; a float64 model "
                                         "reduces with \"none\"");
  return choose_compression(requested, comm.size(), comm.ranks_on_node());
}

template <typename T>
GradientReducer<T>::GradientReducer(Communicator& comm, const ReduceConfig& config)
    : comm_(comm), config_(config),
      algorithm_(comm.resolve(parse_reduce_algorithm(config.algorithm))),
      compression_(choose_compression_for<T>(config, comm)) {}

template <typename T>
void GradientReducer<T>::set_tensor_begins(std::vector<size_t> begins) {
  tensor_begins_ = std::move(begins);
  planned_for_ = nullptr;
  planned_count_ = 0;
}

template <typename T>
void GradientReducer<T>::scatter_into_parts(std::vector<size_t> begins) {
  if (compression_.applied != Compression::kNone)
    throw Error(kExitFailure, "a scattered gradient sum cannot be compressed", Scope::kEveryRank);
  if (comm_.ranks_on_node() > 1 && !shares_node_memory())
    throw Error(kExitFailure, "a scattered gradient sum on nodes of several ranks needs the shm path",
                Scope::kEveryRank);
  part_begins_ = std::move(begins);
  planned_for_ = nullptr;
  planned_count_ = 0;
}

template <typename T>
T* GradientReducer<T>::allocate_shared_buffer(size_t count) {
  if (algorithm_ != ReduceAlgorithm::kShm) return nullptr;
  return static_cast<T*>(comm_.allocate_shared_buffer(count * sizeof(T)));
}

template <typename T>
bool GradientReducer<T>::shares_node_memory() const {
  return algorithm_ == ReduceAlgorithm::kShm && comm_.ranks_on_node() > 1;
}

template <typename T>
T* GradientReducer<T>::share_on_node(const T* data, size_t count) {
  if (!shares_node_memory()) return nullptr;
  return static_cast<T*>(comm_.share_on_node(data, count * sizeof(T)));
}

template <typename T>
void GradientReducer<T>::reduce(T* grads, size_t count) {
  begin(grads, count);
  finish();
}

template <typename T>
void GradientReducer<T>::begin(T* grads, size_t count) {
  assert(started_ == 0 && "finish() the previous reduction first");
  grads_ = grads;
  comm_.take_sums_finite();  // what other sums saw before this reduction is not its concern
  if (grads != planned_for_ || count != planned_count_) {
    buckets_ = plan(count);
    handles_.assign(buckets_.size(), -1);
    // Each bucket's own cut of the parts: the bucket's elements that each rank owns.
    bucket_parts_.assign(part_begins_.empty() ? 0 : buckets_.size(), {});
    for (size_t b = 0; b < bucket_parts_.size(); ++b)
      for (const size_t at : part_begins_)
        bucket_parts_[b].push_back(std::clamp(at, buckets_[b].begin, buckets_[b].end) - buckets_[b].begin);
    started_at_.assign(buckets_.size(), {});
    planned_for_ = grads;
    planned_count_ = count;
  }
}

template <typename T>
std::vector<Bucket> GradientReducer<T>::plan(size_t count) const {
  // Note [one scattered sum on a node]: scattered on nodes of several ranks, each node rank
  // sums and exchanges its own run of the buffer (Note [the scattered sum on a node] in
  // mpi_node_scattered_sum.cpp). A bucket smaller than a run would lie in one rank's run
  // alone, and the node's other ranks would wait for it at the bucket's barriers: bucket
  // after bucket, the node would sum at one rank's pace. The node's sum runs after backward
  // anyway (kShm), so nothing is lost by summing the buffer as one bucket, each rank its
  // whole run at once.
  if (scatters() && shares_node_memory()) return {Bucket{0, count}};
  return plan_buckets(tensor_begins_, count, sizeof(T),
                      static_cast<size_t>(config_.first_bucket_mb * kMiB),
                      static_cast<size_t>(config_.bucket_cap_mb * kMiB));
}

template <typename T>
void GradientReducer<T>::ready_from(size_t offset) {
  if (comm_.size() == 1) return;
  start_ready_buckets(offset);
  comm_.progress();
}

template <typename T>
void GradientReducer<T>::finish() {
  if (comm_.size() > 1) {
    start_ready_buckets(0);
    using Clock = std::chrono::steady_clock;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      const Clock::time_point waited = listener_ ? Clock::now() : Clock::time_point{};
      comm_.wait_sum(handles_[b]);
      if (listener_)
        listener_->bucket_reduced(
            {b, buckets_[b].size() * sizeof(T), started_at_[b], waited, Clock::now()});
    }
    if (exact_handle_ >= 0) comm_.wait_sum(exact_handle_);
    exact_handle_ = -1;
  }
  started_ = 0;
  grads_ = nullptr;
}

template <typename T>
std::optional<bool> GradientReducer<T>::agreed_finite() {
  if (comm_.size() == 1) return std::nullopt;
  const SumsFinite seen = comm_.take_sums_finite();
  if (seen == SumsFinite::kUnchecked) return std::nullopt;  // alike on every rank
  double not_finite = seen == SumsFinite::kNotFinite ? 1.0 : 0.0;
  comm_.allreduce_max(&not_finite, 1);
  return not_finite == 0.0;
}

template <typename T>
double GradientReducer<T>::mean_scale() const {
  // Note [why divide by the world size here]: each rank's gradient is that of the mean loss
  // over its own b = B/N samples. The mean of the N shard gradients is therefore the
  // gradient of the mean loss over all B samples, i.e. exactly what one process computes
  // for the whole global batch. The sum gives N times that, so we scale by 1/N, once,
  // here and nowhere else: the optimizer and the loss never know the world size, and
  // neither do ZeRO-2's unit sums (start_unit_sum), which take the same factor from here.
  // The backend applies the factor in its last pass over the data, which saves a pass over
  // the whole buffer. With one rank there is nothing to sum and nothing to scale.
  return 1.0 / static_cast<double>(comm_.size());
}

template <typename T>
int GradientReducer<T>::start_unit_sum(T* data, const std::vector<size_t>& begins) {
  if (comm_.size() == 1) return -1;  // the one part is the whole sum already
  const int handle = comm_.start_scattered_sum(data, element_type_of<T>(), mean_scale(), begins);
  if (listener_) {
    unit_started_at_.resize(std::max(unit_started_at_.size(), static_cast<size_t>(handle) + 1));
    unit_started_at_[static_cast<size_t>(handle)] = std::chrono::steady_clock::now();
  }
  comm_.progress();
  return handle;
}

template <typename T>
void GradientReducer<T>::wait_unit_sum(int handle, size_t unit, size_t bytes) {
  if (handle < 0) return;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point waited = listener_ ? Clock::now() : Clock::time_point{};
  comm_.wait_sum(handle);
  if (listener_) listener_->bucket_reduced({unit, bytes, unit_started_at_[static_cast<size_t>(handle)], waited, Clock::now()});
}

template <typename T>
void GradientReducer<T>::progress() {
  if (comm_.size() > 1) comm_.progress();
}

template <typename T>
void GradientReducer<T>::start_ready_buckets(size_t ready_offset) {
  const double scale = mean_scale();
  const ElementType type = element_type_of<T>();
  // Buckets run from the end of the buffer to its start (Note [bucket order]).
  while (started_ < buckets_.size() && buckets_[started_].begin >= ready_offset) {
    const Bucket& bucket = buckets_[started_];
    if (listener_) started_at_[started_] = std::chrono::steady_clock::now();
    if (!bucket_parts_.empty()) {
      handles_[started_] = comm_.start_scattered_sum(grads_ + bucket.begin, type, scale, bucket_parts_[started_]);
      ++started_;
      continue;
    }
    size_t end = bucket.end;
    if (compression_.applied != Compression::kNone && bucket.begin < exact_from_ &&
        exact_from_ < bucket.end) {
      exact_handle_ = comm_.start_sum(grads_ + exact_from_, bucket.end - exact_from_, type, scale,
                                      algorithm_, Compression::kNone);
      end = exact_from_;
    }
    const bool exact = bucket.begin >= exact_from_;
    handles_[started_] =
        comm_.start_sum(grads_ + bucket.begin, end - bucket.begin, type, scale, algorithm_,
                        exact ? Compression::kNone : compression_.applied);
    ++started_;
  }
}

template class GradientReducer<float>;
template class GradientReducer<double>;

}  // namespace mpiddp::distributed
