#include "mpi_shared_memory_sum.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "mpi_check.hpp"
#include "mpi_compressed_sum.hpp"
#include "mpi_scattered_sum.hpp"
#include "mpiddp/core/memory.hpp"
#include "sum_kernels.hpp"

namespace mpiddp::distributed {

namespace {
// A window segment holds at most this much; larger sums go through it in pieces. Small
// pieces stay in cache between the copy in, the sum and the copy out, so a big buffer
// crosses the memory bus about twice (read, write back) instead of five times, and the
// window adds only a few MiB to each rank's memory.
constexpr size_t kMaxSegmentBytes = size_t{4} << 20;
// Slices start on cache-line multiples so two ranks never write the same line.
constexpr size_t kSliceAlignBytes = 64;

// Where a segment's usable part starts (see allocate_window).
constexpr size_t kBufferAlignBytes = 64;
char* align_up(char* p) {
  const auto address = reinterpret_cast<uintptr_t>(p);
  return p + (kBufferAlignBytes - address % kBufferAlignBytes) % kBufferAlignBytes;
}

// n elements cut into one slice per rank: slice s is [begin(s), begin(s + 1)).
class Slices {
 public:
  Slices(size_t n, int ranks, size_t element_bytes) : n_(n) {
    const size_t align = kSliceAlignBytes / element_bytes;
    const size_t r = static_cast<size_t>(ranks);
    per_ = ((n + r - 1) / r + align - 1) / align * align;
  }
  size_t begin(int s) const { return std::min(n_, per_ * static_cast<size_t>(s)); }

 private:
  size_t n_, per_;
};

}  // namespace

MPI_Datatype mpi_type_of(ElementType type) {
  switch (type) {
    case ElementType::kFloat32: return MPI_FLOAT;
    case ElementType::kFloat64: return MPI_DOUBLE;
    case ElementType::kInt64: return MPI_INT64_T;
  }
  return MPI_DATATYPE_NULL;
}

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
  // World rank 0's node need not be every node rank's first in world order (a round-robin
  // placement), so it is found, not assumed.
  int lowest = world_rank;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &lowest, 1, MPI_INT, MPI_MIN, node_), "MPI_Allreduce");
  on_first_node_ = lowest == 0;
  check_mpi(MPI_Comm_rank(cross_, &cross_rank_), "MPI_Comm_rank");
  first_node_ = on_first_node_ ? cross_rank_ : INT32_MAX;
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, &first_node_, 1, MPI_INT, MPI_MIN, cross_), "MPI_Allreduce");
  if (nodes_ > 1) {
    compressed_ = std::make_unique<CompressedSum>(cross_);
    scattered_ = std::make_unique<ScatteredSum>(cross_);
  }
  fixed_in_.assign(static_cast<size_t>(local_size_), nullptr);
  fixed_out_.assign(static_cast<size_t>(local_size_), nullptr);
}

SharedMemorySum::~SharedMemorySum() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  compressed_.reset();
  scattered_.reset();
  free_window(staging_);
  for (Window& window : resident_) free_window(window);
  for (Window& window : node_copies_) free_window(window);
  if (cross_ != MPI_COMM_NULL) MPI_Comm_free(&cross_);
  if (node_ != MPI_COMM_NULL) MPI_Comm_free(&node_);
}

// Note [shared memory on 4 KiB pages]: the private buffers are on 2 MiB pages (Note
// [allocate once, keep it mapped]), but the node's windows are files in the MPI library's
// tmpfs (/dev/shm), which gives huge pages only where it is mounted huge=always, or
// huge=advise for a mapping advised MADV_HUGEPAGE: asked for here, before the first touch.
// Debian mounts /dev/shm huge=never. Measured on a Zen 5 VM (docs/benchmarks.md, "The
// shared windows on 4 KiB pages"): under Open MPI 4.1 wide's sharded run on 4 KiB pages
// trains at 414-1,198 samples/s, erratic from run to run (forward, backward, the sum and the
// update all slower), and at 1,200-1,338 on a tmpfs mounted huge=advise
// (osc_sm_backing_directory); MPICH on 4 KiB pages ran 1,207-1,297. `mpiddp bench` reports
// shm_huge_mb, how much of them each rank maps in huge pages; bench/shm_pages.sh compares.
SharedMemorySum::Window SharedMemorySum::allocate_window(size_t bytes, bool only_node_rank0) {
  // Open MPI starts a segment a few words into a page (264 bytes in, seen with 4.1), but the
  // gradients need the 64-byte alignment the model's own buffers have: Eigen's vectorised
  // reductions handle an unaligned head element by element, in another rounding order, so
  // a misaligned buffer gives other bits than an aligned one. Each segment is therefore
  // used from its first 64-byte boundary on.
  bytes = std::max<size_t>(bytes, 1);
  const size_t mine_bytes = only_node_rank0 && local_rank_ != 0 ? 0 : bytes;
  MPI_Info info = MPI_INFO_NULL;
  check_mpi(MPI_Info_create(&info), "MPI_Info_create");
  check_mpi(MPI_Info_set(info, "alloc_shared_noncontig", "true"), "MPI_Info_set");
  Window window;
  char* mine = nullptr;
  check_mpi(MPI_Win_allocate_shared(static_cast<MPI_Aint>(mine_bytes ? mine_bytes + kBufferAlignBytes : 0), 1, info,
                                    node_, &mine,
                                    &window.handle),
            "MPI_Win_allocate_shared");
  MPI_Info_free(&info);
  window.segments.assign(local_size_, nullptr);
  for (int r = 0; r < local_size_; ++r) {
    MPI_Aint size = 0;
    int unit = 0;
    char* base = nullptr;
    check_mpi(MPI_Win_shared_query(window.handle, r, &size, &unit, &base), "MPI_Win_shared_query");
    window.segments[r] = align_up(base);
  }
  mine = static_cast<char*>(window.segments[local_rank_]);
  // One passive epoch for the window's lifetime; MPI_Win_sync + barrier order the accesses.
  check_mpi(MPI_Win_lock_all(MPI_MODE_NOCHECK, window.handle), "MPI_Win_lock_all");
  // Touch our segment now so its page faults happen here, not in the first step; on huge
  // pages where the file system under the window allows them (Note [shared memory on 4 KiB
  // pages]), asked for before the first touch, which is when the kernel chooses.
  if (mine_bytes > 0) {  // a segment of none may be null
    advise_huge_pages(mine, mine_bytes);
    std::memset(mine, 0, mine_bytes);
  }
  window.bytes = bytes;
  return window;
}

void SharedMemorySum::free_window(Window& window) {
  if (window.handle == MPI_WIN_NULL) return;
  MPI_Win_unlock_all(window.handle);
  MPI_Win_free(&window.handle);
  window = Window{};
}

void SharedMemorySum::reserve(size_t bytes) {
  // Collective over the node: every rank asks for the same sizes in the same order.
  if (bytes <= staging_.bytes) return;
  free_window(staging_);
  staging_ = allocate_window(bytes, false);
}

void* SharedMemorySum::allocate_resident(size_t bytes) {
  resident_.push_back(allocate_window(bytes, false));
  return resident_.back().segments[local_rank_];
}

const SharedMemorySum::Window* SharedMemorySum::resident_window_of(const void* data,
                                                                   size_t bytes) const {
  const auto* p = static_cast<const char*>(data);
  for (const Window& window : resident_) {
    const auto* mine = static_cast<const char*>(window.segments[local_rank_]);
    if (p >= mine && p + bytes <= mine + window.bytes) return &window;
  }
  return nullptr;
}

void SharedMemorySum::node_barrier(MPI_Win window, MPI_Win second) {
  check_mpi(MPI_Win_sync(window), "MPI_Win_sync");
  if (second != MPI_WIN_NULL) check_mpi(MPI_Win_sync(second), "MPI_Win_sync");
  check_mpi(MPI_Barrier(node_), "MPI_Barrier(node)");
  check_mpi(MPI_Win_sync(window), "MPI_Win_sync");
  if (second != MPI_WIN_NULL) check_mpi(MPI_Win_sync(second), "MPI_Win_sync");
}

SumsFinite SharedMemorySum::sum(void* data, size_t count, ElementType type, double scale,
                                Compression compress) {
  const size_t elem = element_bytes(type);
  if (const Window* window = resident_window_of(data, count * elem))
    return sum_resident(*window, data, count, type, scale, compress);
  reserve(std::min(count * elem, kMaxSegmentBytes));
  const size_t piece = staging_.bytes / elem;
  void* const* segments = staging_.segments.data();
  char* const mine = static_cast<char*>(segments[local_rank_]);
  auto* bytes = static_cast<char*>(data);
  for (size_t done = 0; done < count; done += piece) {
    const size_t n = std::min(piece, count - done);
    const Slices slices(n, local_size_, elem);
    std::memcpy(mine, bytes + done * elem, n * elem);
    node_barrier(staging_.handle);
    const size_t first = slices.begin(local_rank_), last = slices.begin(local_rank_ + 1);
    if (nodes_ == 1) {
      sum_slice(mine, segments, local_size_, first, last, type, scale);
    } else {
      sum_slice(mine, segments, local_size_, first, last, type, 1.0);
      sum_across_nodes(mine + first * elem, last - first, type, scale, compress);
    }
    node_barrier(staging_.handle);
    for (int s = 0; s < local_size_; ++s) {
      const size_t b = slices.begin(s), e = slices.begin(s + 1);
      std::memcpy(bytes + (done + b) * elem, static_cast<const char*>(segments[s]) + b * elem,
                  (e - b) * elem);
    }
    // Nobody may overwrite a segment while another rank still reads from it.
    node_barrier(staging_.handle);
  }
  return SumsFinite::kUnchecked;
}

// Note [the finite check in the sum]
// A step whose averaged gradients hold a NaN or an Inf must not update (Note [non-finite
// steps are decided together] in src/train/data_parallel_step.cpp). Scanning the reduced buffer
// for them was one more pass over it on every rank: 8 ms a step for wide's 84 MB on a 2-vCPU
// Xeon (docs/benchmarks.md), about as long as the sum. But here each element of a sum is
// computed once, on one rank, in blocks that stay in L1 until they are stored: that rank
// checks the block there, at no cost in memory traffic, and the trainer learns the answer of
// every rank with one allreduce of a flag. Across nodes the slice is checked after the sum
// among the nodes, once, by the rank that stores it into the node's buffers (in the pass
// that scales it, when there is one). The kMpi path checks in the pass that scales each
// rank's copy after the allreduce (scale_in_place); the staging window, the bf16 sums and the
// scattered ones do not tell, and are scanned.
SumsFinite SharedMemorySum::sum_resident(const Window& window, void* data, size_t count,
                                         ElementType type, double scale, Compression compress) {
  // Note [gradients in the shared window]: the trainer's gradient buffer is this rank's
  // segment of a shared window, so every rank can read and write every rank's gradients
  // where backward left them. Rank s computes slice s once and stores it into every rank's
  // buffer: each element has one rounding, on every rank, and no byte is copied in or out.
  // The buffer starts at the same element of every rank's segment, so the segments serve
  // as the kernels' inputs and outputs with the slice's indices shifted by that element.
  const size_t elem = element_bytes(type);
  void* const* segments = window.segments.data();
  const size_t base =
      static_cast<size_t>(static_cast<char*>(data) - static_cast<char*>(segments[local_rank_])) / elem;
  const Slices slices(count, local_size_, elem);
  const size_t first = base + slices.begin(local_rank_), last = base + slices.begin(local_rank_ + 1);
  node_barrier(window.handle);  // every rank's buffer is final
  bool finite = true;
  if (nodes_ == 1) {
    finite = sum_slice_into_every(segments, local_size_, segments, local_size_, first, last, type, scale);
  } else {
    sum_slice(segments[local_rank_], segments, local_size_, first, last, type, 1.0);
    char* slice = static_cast<char*>(segments[local_rank_]) + first * elem;
    const SumsFinite seen = sum_across_nodes(slice, last - first, type, scale, compress);
    finite = seen == SumsFinite::kUnchecked ? values_finite(slice, last - first, type)
                                            : seen == SumsFinite::kFinite;
    store_in_other_segments(window, first * elem, slice, (last - first) * elem);
  }
  node_barrier(window.handle);  // every slice is in every buffer
  return finite ? SumsFinite::kFinite : SumsFinite::kNotFinite;
}

// Note [the fixed-point sum converted in place]
// The deterministic mode's chunked pass leaves its int64 sums in one shared window and
// wants float gradients in another (the model's, Note [gradients in the shared window]).
// Summed as any buffer (rank s writes slice s of the int64 sums into every rank's) and then
// converted by every rank (all P values), each rank read 2P int64 and wrote 2P, then read P
// int64 again and wrote P values: at mlp's 1.9 M parameters about 52 MB a rank and step.
// Here rank s sums slice s of the int64 sums once and writes it, converted, into every
// rank's gradients: on one node the int64 are read once and never written, about 22 MB less
// a rank (across nodes the node's slice is written once, into the rank's own sums, for the
// exchange among the nodes). The conversion is fixed_point_to_values', as on every path, so
// the bits are the same.
bool SharedMemorySum::sums_fixed_point_in_place(const int64_t* sums, size_t count, const void* out,
                                                ElementType out_type) const {
  return resident_window_of(sums, count * sizeof(int64_t)) && resident_window_of(out, count * element_bytes(out_type));
}

void SharedMemorySum::sum_fixed_point(int64_t* sums, size_t count, const kernels::FixedPointGroups& groups, void* out,
                                      ElementType out_type) {
  const Window* sums_window = resident_window_of(sums, count * sizeof(int64_t));
  const Window* out_window = resident_window_of(out, count * element_bytes(out_type));
  at_same_offset(*sums_window, sums, fixed_in_);
  at_same_offset(*out_window, out, fixed_out_);
  // Slices of whole cache lines of the values (float's are the smaller), so of the int64 too.
  const Slices slices(count, local_size_, sizeof(float));
  const size_t first = slices.begin(local_rank_), last = slices.begin(local_rank_ + 1);
  node_barrier(sums_window->handle, out_window->handle);  // every rank's sums are final, nobody reads `out`
  if (nodes_ == 1) {
    sum_fixed_slice_into_every(fixed_out_.data(), local_size_, out_type, fixed_in_.data(), local_size_, first, last,
                               groups);
  } else {
    // The node's slice into this rank's own sums, the slice summed among the nodes (exact in
    // any order), then converted from there.
    sum_slice(sums, fixed_in_.data(), local_size_, first, last, ElementType::kInt64, 1.0);
    sum_across_nodes(sums + first, last - first, ElementType::kInt64, 1.0, Compression::kNone);
    const void* own = sums;
    sum_fixed_slice_into_every(fixed_out_.data(), local_size_, out_type, &own, 1, first, last, groups);
  }
  node_barrier(out_window->handle, sums_window->handle);  // every slice is in every rank's `out`
}

void SharedMemorySum::at_same_offset(const Window& window, const void* data, std::vector<void*>& segments) const {
  const auto offset = static_cast<size_t>(static_cast<const char*>(data) -
                                          static_cast<const char*>(window.segments[local_rank_]));
  for (int r = 0; r < local_size_; ++r)
    segments[static_cast<size_t>(r)] = static_cast<char*>(window.segments[r]) + offset;
}

// Note [parameters once per node]: with reduce.shard_optimizer on the shm path the node's
// ranks share one copy of the parameters. Forward and backward only read them; node rank s
// updates part s where it lies, and one node barrier later every rank reads every part: no
// part is copied anywhere, so the node holds the parameters once and the update's memory
// traffic is divided by the ranks. Nothing else writes them during training except a
// resynchronisation (broadcast_node_copy). A rank's replica is its node's, so the replica
// check can find a difference between nodes only.
void* SharedMemorySum::share_on_node(const void* data, size_t bytes) {
  node_copies_.push_back(allocate_window(bytes, true));
  Window& window = node_copies_.back();
  char* copy = static_cast<char*>(window.segments[0]);
  if (local_rank_ == 0) std::memcpy(copy, data, bytes);
  node_barrier(window.handle);
  // Map every page now, so the first forward pass does not fault them in one by one.
  constexpr size_t kPage = 4096;
  volatile char sink = 0;
  for (size_t at = 0; at < bytes; at += kPage) sink = sink + copy[at];
  return copy;
}

const SharedMemorySum::Window* SharedMemorySum::node_copy_of(const void* data, size_t bytes) const {
  const auto* p = static_cast<const char*>(data);
  for (const Window& window : node_copies_) {
    const auto* copy = static_cast<const char*>(window.segments[0]);
    if (p >= copy && p + bytes <= copy + window.bytes) return &window;
  }
  return nullptr;
}

bool SharedMemorySum::in_node_copy(const void* data, size_t bytes) const {
  return node_copy_of(data, bytes) != nullptr;
}

void SharedMemorySum::end_node_copy_writes(const void* data, size_t bytes) {
  node_barrier(node_copy_of(data, bytes)->handle);
}

void SharedMemorySum::broadcast_node_copy(void* data, size_t bytes) {
  const Window* window = node_copy_of(data, bytes);
  // Every rank of the node reads the copy until the broadcast overwrites it.
  node_barrier(window->handle);
  if (local_rank_ == 0 && nodes_ > 1) broadcast_bytes(data, bytes, first_node_, cross_, "MPI_Bcast(node copies)");
  node_barrier(window->handle);
}

void SharedMemorySum::store_in_other_segments(const Window& window, size_t offset,
                                              const void* from, size_t bytes) const {
  if (bytes == 0) return;
  for (int r = 0; r < local_size_; ++r)
    if (r != local_rank_) std::memcpy(static_cast<char*>(window.segments[r]) + offset, from, bytes);
}

SumsFinite SharedMemorySum::sum_across_nodes(void* slice, size_t count, ElementType type,
                                             double scale, Compression compress) {
  if (compress == Compression::kBf16 && compressed_ && count > 0) {
    // The scale goes into the float32 sum before its one rounding (mpi_compressed_sum.cpp).
    compressed_->wait(compressed_->start(static_cast<float*>(slice), count, scale));
    compressed_->release_all();
    return SumsFinite::kUnchecked;
  }
  if (count > 0)
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, slice, static_cast<int>(count), mpi_type_of(type),
                            MPI_SUM, cross_),
              "MPI_Allreduce(slice across nodes)");
  return scale_in_place(slice, count, type, scale);
}

}  // namespace mpiddp::distributed
