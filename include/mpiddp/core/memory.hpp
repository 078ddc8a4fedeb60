#pragma once
// Memory set-up for a machine where a page fault costs ~11 µs per 4 KiB page.
//
// Note [allocate once, keep it mapped]: glibc serves large requests with fresh mmap()
// mappings and unmaps them on free(), so a buffer allocated and freed every step (ours, or
// MPI's temporaries inside a collective) faults in every page again each time: an 84 MB
// MPI_Allreduce spends most of its time in page faults. configure_allocator() makes glibc
// serve everything from the heap and never give it back, so freed memory is reused still
// mapped; HugePageAllocator puts our own big buffers on 2 MiB transparent huge pages,
// which cuts both their faults and their TLB misses by 512x. Those big buffers live for the
// whole run, so they are mapped for themselves and unmapped when freed: a buffer given up
// (the gradients, once they move to shared memory) leaves the resident set.
#include <cstddef>
#include <new>
#include <utility>

namespace mpiddp {

// Called once at program start, before MPI_Init: mallopt of the mmap and trim thresholds.
// MPIDDP_DEFAULT_MALLOC=1 in the environment leaves glibc's defaults (for comparisons).
void configure_allocator();

// Allocates `bytes` aligned for AVX-512; buffers of 2 MiB and more are a mapping of their
// own, aligned to 2 MiB and advised as huge pages (madvise MADV_HUGEPAGE): their whole 2 MiB
// pages become huge pages, the rest stays in 4 KiB pages. Throws std::bad_alloc.
// free_buffer takes the same `bytes`.
void* allocate_buffer(size_t bytes);
void free_buffer(void* p, size_t bytes) noexcept;
// allocate_buffer's memory, all zeros; from 2 MiB on, untouched (see UntouchedZeros).
void* allocate_zeroed_buffer(size_t bytes);
// Asks for 2 MiB transparent huge pages on the pages of [p, p + bytes) (madvise
// MADV_HUGEPAGE), for memory mapped by someone else: MPI's shared windows. On shared memory
// it takes effect only where the file system allows it (tmpfs mounted with huge=advise);
// elsewhere nothing changes. See Note [shared memory on 4 KiB pages].
void advise_huge_pages(void* p, size_t bytes);

// A std::allocator for the model's and trainer's flat buffers (see allocate_buffer).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_buffer(n * sizeof(T))); }
  void deallocate(T* p, size_t n) noexcept { free_buffer(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

// `count` zeros of T that occupy no memory until written: from 2 MiB on they are a fresh
// mapping, which the kernel fills with zeros page by page when first touched. For a buffer
// that may be given up before it is ever used (the model's own gradients, once they move to
// shared memory: Model::place_gradients), so that it never adds to the peak RSS.
template <typename T>
class UntouchedZeros {
 public:
  UntouchedZeros() = default;
  explicit UntouchedZeros(size_t count)
      : data_(static_cast<T*>(allocate_zeroed_buffer(count * sizeof(T)))), count_(count) {}
  ~UntouchedZeros() { free_buffer(data_, count_ * sizeof(T)); }
  UntouchedZeros(UntouchedZeros&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), count_(std::exchange(other.count_, 0)) {}
  UntouchedZeros& operator=(UntouchedZeros&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
    return *this;
  }
  T* data() { return data_; }

 private:
  T* data_ = nullptr;
  size_t count_ = 0;
};

// The resident set high-water mark of this process in MiB (getrusage ru_maxrss). It counts
// every shared page the process has touched whole: the node's shared windows and libraries.
double peak_rss_mb();
// This process's proportional set size now, in MiB (Pss in /proc/self/smaps_rollup): each
// shared page divided by the processes that map it, so the ranks of a node add up to the
// node's memory. 0 where the kernel does not report it.
double current_pss_mb();
// How much of this process's shared memory is mapped in 2 MiB pages now, in MiB
// (ShmemPmdMapped in /proc/self/smaps_rollup): the node's shared windows, when the file
// system under them gives huge pages. 0 where the kernel does not report it.
double shared_huge_page_mb();

}  // namespace mpiddp
