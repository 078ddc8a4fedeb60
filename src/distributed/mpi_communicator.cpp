#include "mpiddp/distributed/mpi_communicator.hpp"

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <thread>
#include <string>
#include <vector>

#include "mpi_check.hpp"
#include "mpi_compressed_sum.hpp"
#include "mpi_scattered_sum.hpp"
#include "mpi_shared_memory_sum.hpp"
#include "mpi_watchdog.hpp"
#include "mpiddp/core/error.hpp"
#include "sum_kernels.hpp"

namespace mpiddp::distributed {

struct MpiCommunicator::PendingSum {
  void* data;        // null once waited for
  size_t count;
  ElementType type;
  double scale;      // still to apply after the wait (MPI_Iallreduce only sums)
  MPI_Request request;
  bool shared;       // through SharedMemorySum, run in wait_sum
  Compression compress;
  int compressed;    // the CompressedSum handle of a kMpi sum in bf16, else -1
  int scattered;     // the ScatteredSum handle of a start_scattered_sum or gathered sum, else -1
  bool gathered;     // a kMpi sum among nodes of one rank, through ScatteredSum::start_gathered
  // A start_scattered_sum through the node's shared window (shared too): its parts.
  const std::vector<size_t>* parts = nullptr;
};

struct MpiCommunicator::PendingGather {
  MPI_Request request = MPI_REQUEST_NULL;
  bool waited = true;              // false from start_gather to wait_gather: its handle is taken
  size_t bytes = 0;                // the whole unit's, for the watchdog
  std::vector<int> counts, offsets;  // (size) by world rank, in bytes: rank r sends part part_of_rank_[r]
};

// Every MPI call goes through here: a failure says which call, on which rank, and what to
// check, then ends the job (a failed collective leaves the other ranks waiting in it).
void check_mpi(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(code, text, &length);
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr,
               "rank %d: %s failed: %s\n"
               "  (a peer rank may have died; check the other ranks' messages above)\n",
               rank, call, text);
  std::fflush(stderr);
  abort_job(kExitFailure);
}

void abort_job(int exit_code) {
  // The launcher forwards each rank's stderr through a pipe; MPICH's Hydra can kill the job
  // before it has passed on the line just written (seen in cli_outputs and in the watchdog's
  // report in cli_faults). A moment's wait, on this path only, lets the message arrive.
  // The wait also lets the peers' watchdogs write their flight files (before_abort asks
  // them to) before MPI_Abort ends them.
  MpiWatchdog::before_abort(exit_code);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; this satisfies [[noreturn]]
}

// MPI counts are int. A larger count cast to int would silently reduce some other number of
// elements (a wrapped count); every caller passes the same count on every rank, so every
// rank refuses it alike. (The trainer's buckets are capped far below: reduce.bucket_cap_mb.)
int mpi_count(size_t count, const char* call) {
  if (count > static_cast<size_t>(INT32_MAX))
    throw Error(kExitFailure,
                std::string(call) + ": " + std::to_string(count) +
                    " elements, more than an MPI count holds (2^31 - 1); reduce in pieces",
                Scope::kEveryRank);
  return static_cast<int>(count);
}

MpiCommunicator::MpiCommunicator() {
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
  shared_ = std::make_unique<SharedMemorySum>(MPI_COMM_WORLD);
  compressed_ = std::make_unique<CompressedSum>(MPI_COMM_WORLD);
  scattered_ = std::make_unique<ScatteredSum>(MPI_COMM_WORLD);
  part_of_rank_.resize(static_cast<size_t>(size_));
  const int part = shared_->world_part();
  check_mpi(MPI_Allgather(&part, 1, MPI_INT, part_of_rank_.data(), 1, MPI_INT, MPI_COMM_WORLD),
            "MPI_Allgather(world parts)");
  watchdog_ = std::make_unique<MpiWatchdog>(rank_, size_);
}

MpiCommunicator::~MpiCommunicator() = default;

void MpiCommunicator::start_watchdog(double timeout_s, bool abort_job) {
  watchdog_->start(timeout_s, abort_job);
}

void MpiCommunicator::publish_step(int64_t step) { watchdog_->publish_step(step); }

void MpiCommunicator::set_flight_file(const std::string& path) { watchdog_->set_flight_file(path); }

int MpiCommunicator::ranks_on_node() const { return shared_->ranks_on_node(); }

ReduceAlgorithm MpiCommunicator::resolve(ReduceAlgorithm algorithm) const {
  const bool shared = shared_->ranks_on_node() > 1;
  switch (algorithm) {
    case ReduceAlgorithm::kMpi: return ReduceAlgorithm::kMpi;
    case ReduceAlgorithm::kAuto:
      return shared && shared_->usable() ? ReduceAlgorithm::kShm : ReduceAlgorithm::kMpi;
    case ReduceAlgorithm::kShm:
      if (!shared_->usable())
        throw ConfigError("reduce.algorithm",
                          "\"shm\" needs the same number of ranks on every node; use \"mpi\" "
                          "or \"auto\"");
      return ReduceAlgorithm::kShm;
  }
  return ReduceAlgorithm::kMpi;
}

int MpiCommunicator::start_sum(void* data, size_t count, ElementType type, double scale,
                               ReduceAlgorithm algorithm, Compression compress) {
  PendingSum sum{data, count, type, scale, MPI_REQUEST_NULL, false, compress, -1, -1, false, nullptr};
  if (compress == Compression::kBf16 && type != ElementType::kFloat32)
    throw Error(kExitFailure, "bf16 compression of a float64 sum", Scope::kEveryRank);
  if (resolve(algorithm) == ReduceAlgorithm::kShm) {
    // Run in wait_sum: the shared-memory sum is done by the ranks' own cores, and no core
    // is idle during backward to do it in the background; started early it would only
    // interrupt backward with node barriers. Its cost shows as exposed sync time.
    sum.shared = true;
  } else if (compress == Compression::kBf16) {
    sum.compressed = compressed_->start(static_cast<float*>(data), count, scale);
  } else if (shared_->usable() && shared_->ranks_on_node() == 1) {
    // Every node holds one rank (usable(): alike on every rank), so the sum crosses the
    // network: Note [the allreduce as a scattered sum and a gather] in mpi_scattered_sum.cpp.
    sum.scattered = scattered_->start_gathered(data, count, type, scale);  // scaled in its own sum
    sum.gathered = true;
  } else {
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, mpi_count(count, "MPI_Iallreduce"),
                             mpi_type_of(type), MPI_SUM,
                             MPI_COMM_WORLD, &sum.request),
              "MPI_Iallreduce");
  }
  pending_.push_back(sum);
  return static_cast<int>(pending_.size()) - 1;
}

int MpiCommunicator::start_scattered_sum(void* data, ElementType type, double scale,
                                         const std::vector<size_t>& begins) {
  PendingSum sum{data, begins.back(), type, 1.0, MPI_REQUEST_NULL, false, Compression::kNone, -1, -1, false, nullptr};
  if (shared_->ranks_on_node() > 1) {
    // Several ranks on each node: run in wait_sum through the node's shared window, as a
    // kShm start_sum is (Note [the scattered sum on a node]).
    sum.shared = true;
    sum.scale = scale;
    sum.parts = &begins;
  } else {
    sum.scattered = scattered_->start(data, type, scale, begins);  // scaled in its own sum
  }
  pending_.push_back(sum);
  return static_cast<int>(pending_.size()) - 1;
}

void MpiCommunicator::sum_fixed_point(int64_t* sums, size_t count, const kernels::FixedPointGroups& groups, void* out,
                                      ElementType out_type, ReduceAlgorithm algorithm) {
  if (resolve(algorithm) == ReduceAlgorithm::kShm && shared_->sums_fixed_point_in_place(sums, count, out, out_type)) {
    InCollective scope(*watchdog_, Collective::kAllreduceSumInt64, count * sizeof(int64_t));
    shared_->sum_fixed_point(sums, count, groups, out, out_type);
    return;
  }
  Communicator::sum_fixed_point(sums, count, groups, out, out_type, algorithm);
}

void* MpiCommunicator::allocate_shared_buffer(size_t bytes) {
  if (shared_->ranks_on_node() < 2 || !shared_->usable()) return nullptr;
  InCollective scope(*watchdog_, Collective::kSharedWindow, bytes);
  return shared_->allocate_resident(bytes);
}

void* MpiCommunicator::share_on_node(const void* data, size_t bytes) {
  if (shared_->ranks_on_node() < 2 || !shared_->usable()) return nullptr;
  InCollective scope(*watchdog_, Collective::kSharedWindow, bytes);
  return shared_->share_on_node(data, bytes);
}

int MpiCommunicator::start_gather(void* data, const std::vector<size_t>& begins) {
  if (size_ == 1) return -1;
  // A gather waited for is free again: no more are ever made than are in flight at once.
  size_t free = 0;
  while (free < gathers_.size() && !gathers_[free].waited) ++free;
  if (free == gathers_.size()) gathers_.emplace_back();
  PendingGather& gather = gathers_[free];
  gather.waited = false;
  mpi_count(begins.back(), "MPI_Iallgatherv");  // every offset then fits too
  gather.bytes = begins.back();
  gather.counts.resize(static_cast<size_t>(size_));
  gather.offsets.resize(static_cast<size_t>(size_));
  for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
    const auto p = static_cast<size_t>(part_of_rank_[r]);
    gather.offsets[r] = static_cast<int>(begins[p]);
    gather.counts[r] = static_cast<int>(begins[p + 1] - begins[p]);
  }
  // In place: this rank's part is where every rank's copy of the unit keeps it.
  check_mpi(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, gather.counts.data(), gather.offsets.data(),
                            MPI_BYTE, MPI_COMM_WORLD, &gather.request),
            "MPI_Iallgatherv(a unit's parameters)");
  return static_cast<int>(free);
}

void MpiCommunicator::wait_gather(int handle) {
  if (handle < 0) return;
  PendingGather& gather = gathers_.at(static_cast<size_t>(handle));
  InCollective scope(*watchdog_, Collective::kUnitGather, gather.bytes);
  check_mpi(MPI_Wait(&gather.request, MPI_STATUS_IGNORE), "MPI_Wait(a unit's parameters)");
  gather.waited = true;
}

void MpiCommunicator::progress() {
  // A started gather advances only inside MPI calls too (Open MPI's progress engine runs
  // every pending request on any test).
  for (PendingGather& gather : gathers_) {
    if (gather.request == MPI_REQUEST_NULL) continue;
    int done = 0;
    check_mpi(MPI_Test(&gather.request, &done, MPI_STATUS_IGNORE), "MPI_Test(a unit's parameters)");
    if (!done) break;
  }
  for (PendingSum& sum : pending_) {
    if (sum.compressed >= 0) {
      if (!compressed_->advance(sum.compressed)) return;
      continue;
    }
    if (sum.scattered >= 0) {
      if (sum.data != nullptr && !scattered_->advance(sum.scattered)) return;
      continue;
    }
    if (sum.request == MPI_REQUEST_NULL) continue;
    int done = 0;
    check_mpi(MPI_Test(&sum.request, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (!done) return;  // collectives complete in order: no use testing later ones
  }
}

void MpiCommunicator::wait_sum(int handle) {
  PendingSum& sum = pending_.at(static_cast<size_t>(handle));
  // The gradient sum is where a stalled peer is most often noticed: the watchdog watches it.
  const size_t element_bytes = sum.type == ElementType::kFloat32 ? sizeof(float) : sizeof(double);  // int64: 8 too
  const bool scattered = sum.scattered >= 0 || sum.parts != nullptr;
  InCollective scope(*watchdog_, scattered                         ? Collective::kScatteredSum
                                 : sum.type == ElementType::kFloat32 ? Collective::kAllreduceSumFloat
                                 : sum.type == ElementType::kInt64   ? Collective::kAllreduceSumInt64
                                                                     : Collective::kAllreduceSumDouble,
                     sum.count * element_bytes);
  SumsFinite seen = SumsFinite::kUnchecked;
  if (sum.parts != nullptr) {
    shared_->sum_scattered(sum.data, sum.type, sum.scale, *sum.parts);
  } else if (sum.shared) {
    seen = shared_->sum(sum.data, sum.count, sum.type, sum.scale, sum.compress);
  } else if (sum.compressed >= 0) {
    compressed_->wait(sum.compressed);  // scaled before the last rounding
  } else if (sum.scattered >= 0) {
    const bool part_finite = scattered_->wait(sum.scattered);
    // A gathered sum: each rank vouches for the part it summed, and the ranks agree on the
    // verdict (GradientReducer::agreed_finite). int64 sums are never checked (scale_in_place).
    if (sum.gathered && sum.type != ElementType::kInt64)
      seen = part_finite ? SumsFinite::kFinite : SumsFinite::kNotFinite;
  } else {
    check_mpi(MPI_Wait(&sum.request, MPI_STATUS_IGNORE), "MPI_Wait");
    // Every rank scales its whole copy, and checks it on the way (Note [the finite check in
    // the sum]).
    seen = scale_in_place(sum.data, sum.count, sum.type, sum.scale);
  }
  sums_waited_ = true;
  sums_unchecked_ = sums_unchecked_ || seen == SumsFinite::kUnchecked;
  sums_not_finite_ = sums_not_finite_ || seen == SumsFinite::kNotFinite;
  sum.scale = 1.0;
  sum.data = nullptr;
  // Every sum waited for: the handles start again from 0 (clear keeps the capacity).
  if (std::all_of(pending_.begin(), pending_.end(),
                  [](const PendingSum& s) { return s.data == nullptr; })) {
    pending_.clear();
    compressed_->release_all();
    scattered_->release_all();
  }
}

SumsFinite MpiCommunicator::take_sums_finite() {
  const SumsFinite seen = !sums_waited_ || sums_unchecked_ ? SumsFinite::kUnchecked
                          : sums_not_finite_               ? SumsFinite::kNotFinite
                                                           : SumsFinite::kFinite;
  sums_waited_ = sums_unchecked_ = sums_not_finite_ = false;
  return seen;
}

void MpiCommunicator::allreduce_sum(float* data, size_t count) {
  InCollective scope(*watchdog_, Collective::kAllreduceSumFloat, count * sizeof(float));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count, "MPI_Allreduce"), MPI_FLOAT, MPI_SUM,
                          MPI_COMM_WORLD),
            "MPI_Allreduce(float, sum)");
}

void MpiCommunicator::allreduce_sum(double* data, size_t count) {
  InCollective scope(*watchdog_, Collective::kAllreduceSumDouble, count * sizeof(double));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count, "MPI_Allreduce"), MPI_DOUBLE, MPI_SUM,
                          MPI_COMM_WORLD),
            "MPI_Allreduce(double, sum)");
}

void MpiCommunicator::allreduce_max(double* data, size_t count) {
  InCollective scope(*watchdog_, Collective::kAllreduceMaxDouble, count * sizeof(double));
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count, "MPI_Allreduce"), MPI_DOUBLE, MPI_MAX,
                          MPI_COMM_WORLD),
            "MPI_Allreduce(double, max)");
}

void MpiCommunicator::broadcast(void* data, size_t bytes, int root) {
  InCollective scope(*watchdog_, Collective::kBroadcast, bytes);
  if (root == 0 && shared_->in_node_copy(data, bytes)) {
    // Each node's ranks share the bytes: one rank per node receives them.
    shared_->broadcast_node_copy(data, bytes);
    return;
  }
  broadcast_bytes(data, bytes, root, MPI_COMM_WORLD, "MPI_Bcast");
}

void broadcast_bytes(void* data, size_t bytes, int root, MPI_Comm comm, const char* call) {
  constexpr size_t kChunk = size_t{1} << 30;
  auto* p = static_cast<char*>(data);
  for (size_t done = 0; done < bytes; done += kChunk) {
    const size_t n = bytes - done < kChunk ? bytes - done : kChunk;
    check_mpi(MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, root, comm), call);
  }
}

std::vector<uint64_t> MpiCommunicator::allgather(uint64_t value) {
  std::vector<uint64_t> values(size_);
  InCollective scope(*watchdog_, Collective::kAllgather, sizeof value);
  check_mpi(MPI_Allgather(&value, 1, MPI_UINT64_T, values.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD),
            "MPI_Allgather");
  return values;
}

std::vector<std::string> MpiCommunicator::allgather_string(const std::string& value) {
  // Lengths first (they differ per rank), then the bytes with MPI_Allgatherv. Meant for
  // short strings like host names: counts and offsets are int, as MPI wants.
  const auto lengths = allgather(static_cast<uint64_t>(value.size()));
  std::vector<int> counts(size_), offsets(size_);
  uint64_t total = 0;
  for (int r = 0; r < size_; ++r) {
    if (total + lengths[r] > static_cast<uint64_t>(INT32_MAX))
      throw Error(kExitFailure, "allgather of strings: more than 2 GiB in total",
                  Scope::kEveryRank);  // every rank sees the same lengths
    offsets[r] = static_cast<int>(total);
    counts[r] = static_cast<int>(lengths[r]);
    total += lengths[r];
  }
  std::string all(total, '\0');
  // The total, not this rank's part: the same on every rank (docs/log-format.md).
  InCollective scope(*watchdog_, Collective::kAllgatherStrings, static_cast<size_t>(total));
  check_mpi(MPI_Allgatherv(value.data(), static_cast<int>(value.size()), MPI_CHAR, all.data(),
                           counts.data(), offsets.data(), MPI_CHAR, MPI_COMM_WORLD),
            "MPI_Allgatherv(strings)");
  std::vector<std::string> values(size_);
  for (int r = 0; r < size_; ++r) values[r] = all.substr(offsets[r], counts[r]);
  return values;
}

void MpiCommunicator::barrier() {
  InCollective scope(*watchdog_, Collective::kBarrier, 0);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
}

void MpiCommunicator::abort(int exit_code, const std::string& message) {
  std::fprintf(stderr, "rank %d: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  abort_job(exit_code);
}

std::string MpiCommunicator::library_version() const {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string version(text, static_cast<size_t>(length));
  const auto newline = version.find('\n');
  if (newline != std::string::npos) version.resize(newline);
  while (!version.empty() && (version.back() == ' ' || version.back() == '\0')) version.pop_back();
  return version;
}

std::string MpiCommunicator::host_name() const {
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(name, &length);
  return std::string(name, static_cast<size_t>(length));
}

}  // namespace mpiddp::distributed
