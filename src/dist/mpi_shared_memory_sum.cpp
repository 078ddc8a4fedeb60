#include "mpi_shared_memory_sum.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "mpi_check.hpp"
#include "sum_kernels.hpp"

namespace mpiddp::dist {

namespace {
// A window segment holds at most this much; larger sums go through it in pieces. Small
// pieces stay in cache between the copy in, the sum and the copy out, so a big buffer
// crosses the memory bus about twice (read, write back) instead of five times, and the
// window adds only a few MiB to each rank's memory.
constexpr size_t kMaxSegmentBytes = size_t{4} << 20;
// Slices start on cache-line multiples so two ranks never write the same line.
constexpr size_t kSliceAlignBytes = 64;
}  // namespace

SharedMemorySum::SharedMemorySum(MPI_Comm world) {
  int world_rank = 0;
  check_mpi(MPI_Comm_rank(world, &world_rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &node_),
            "MPI_Comm_split_type(SHARED)");
  if (const char* k = std::getenv("MPIDDP_TEST_RANKS_PER_NODE"); k && std::atoi(k) > 0) {
    int rank = 0;
    check_mpi(MPI_Comm_rank(node_, &rank), "MPI_Comm_rank");
    MPI_Comm group = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(node_, rank / std::atoi(k), rank, &group), "MPI_Comm_split");
    MPI_Comm_free(&node_);
    node_ = group;
  }
  check_mpi(MPI_Comm_rank(node_, &local_rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(node_, &local_size_), "MPI_Comm_size");
  check_mpi(MPI_Comm_split(world, local_rank_, world_rank, &cross_), "MPI_Comm_split");
  check_mpi(MPI_Comm_size(cross_, &nodes_), "MPI_Comm_size");
  int sizes[2] = {local_size_, -local_size_};
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, world), "MPI_Allreduce");
  uniform_ = sizes[0] == -sizes[1];
}

SharedMemorySum::~SharedMemorySum() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (window_ != MPI_WIN_NULL) {
    MPI_Win_unlock_all(window_);
    MPI_Win_free(&window_);
  }
  if (cross_ != MPI_COMM_NULL) MPI_Comm_free(&cross_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

void SharedMemorySum::reserve(size_t bytes) {
  // Collective over the node: every rank asks for the same sizes in the same order.
  if (bytes <= segment_bytes_) return;
  if (window_ != MPI_WIN_NULL) {
    check_mpi(MPI_Win_unlock_all(window_), "MPI_Win_unlock_all");
    check_mpi(MPI_Win_free(&window_), "MPI_Win_free");
  }
  char* mine = nullptr;
  check_mpi(MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes), 1, MPI_INFO_NULL, node_, &mine,
                                    &window_),
            "MPI_Win_allocate_shared");
  segments_.assign(local_size_, nullptr);
  for (int r = 0; r < local_size_; ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    check_mpi(MPI_Win_shared_query(window_, r, &size, &unit, &segments_[r]),
              "MPI_Win_shared_query");
  }
  // One passive epoch for the window's lifetime; MPI_Win_sync + barrier order the accesses.
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_), "MPI_Win_lock_all");
  // Touch our segment now so its page faults happen here, not in the first step.
  std::memset(mine, 0, bytes);
  segment_bytes_ = bytes;
}

void SharedMemorySum::node_barrier() {
  check_mpi(MPI_Win_sync(window_), "MPI_Win_sync");
  check_mpi(MPI_Barrier(node_), "MPI_Barrier(node)");
  check_mpi(MPI_Win_sync(window_), "MPI_Win_sync");
}

void SharedMemorySum::sum(void* data, size_t count, ElementType type, double scale) {
  const size_t elem = element_bytes(type);
  reserve(std::min(count * elem, kMaxSegmentBytes));
  const size_t piece = segment_bytes_ / elem;
  const size_t align = kSliceAlignBytes / elem;
  const MPI_Datatype mpi_type = type == ElementType::kFloat32 ? MPI_FLOAT : MPI_DOUBLE;
  std::vector<const void*> inputs(segments_.begin(), segments_.end());
  auto* bytes = static_cast<char*>(data);
  for (size_t done = 0; done < count; done += piece) {
    const size_t n = std::min(piece, count - done);
    // Slice s: [slice_begin(s), slice_begin(s + 1)), cache-line aligned.
    const size_t ranks = static_cast<size_t>(local_size_);
    const size_t per = ((n + ranks - 1) / ranks + align - 1) / align * align;
    auto slice_begin = [&](int s) { return std::min(n, per * static_cast<size_t>(s)); };
    std::memcpy(segments_[local_rank_], bytes + done * elem, n * elem);
    node_barrier();
    const size_t first = slice_begin(local_rank_), last = slice_begin(local_rank_ + 1);
    char* slice = segments_[local_rank_] + first * elem;
    if (nodes_ == 1) {
      sum_slice(segments_[local_rank_], inputs.data(), local_size_, first, last, type, scale);
    } else {
      sum_slice(segments_[local_rank_], inputs.data(), local_size_, first, last, type, 1.0);
      if (last > first)
        check_mpi(MPI_Allreduce(MPI_IN_PLACE, slice, static_cast<int>(last - first), mpi_type,
                                MPI_SUM, cross_),
                  "MPI_Allreduce(slice across nodes)");
      scale_in_place(slice, last - first, type, scale);
    }
    node_barrier();
    for (int s = 0; s < local_size_; ++s) {
      const size_t b = slice_begin(s), e = slice_begin(s + 1);
      std::memcpy(bytes + (done + b) * elem, segments_[s] + b * elem, (e - b) * elem);
    }
    // Nobody may overwrite a segment while another rank still reads from it.
    node_barrier();
  }
}

}  // namespace mpiddp::dist
