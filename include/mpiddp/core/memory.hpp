#pragma once
// Memory set-up for a machine where a page fault costs ~11 µs per 4 KiB page.
//
// Note [allocate once, keep it mapped]: glibc serves large requests with fresh mmap()
// mappings and unmaps them on free(), so a buffer allocated and freed every step (ours, or
// MPI's temporaries inside a collective) faults in every page again each time: an 84 MB
// MPI_Allreduce spends most of its time in page faults. configure_allocator() makes glibc
// serve everything from the heap and never give it back, so freed memory is reused still
// mapped; HugePageAllocator puts our own big buffers on 2 MiB transparent huge pages,
// which cuts both their faults and their TLB misses by 512x.
#include <cstddef>
#include <new>

namespace mpiddp {

// Called once at program start, before MPI_Init: mallopt of the mmap and trim thresholds.
// MPIDDP_DEFAULT_MALLOC=1 in the environment leaves glibc's defaults (for comparisons).
void configure_allocator();

// Allocates `bytes` aligned for AVX-512; buffers of 2 MiB and more are aligned to 2 MiB and
// advised as huge pages (madvise MADV_HUGEPAGE). Throws std::bad_alloc.
void* allocate_buffer(size_t bytes);
void free_buffer(void* p) noexcept;

// A std::allocator for the model's and trainer's flat buffers (see allocate_buffer).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(allocate_buffer(n * sizeof(T))); }
  void deallocate(T* p, size_t) noexcept { free_buffer(p); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

// The resident set high-water mark of this process in MiB (getrusage ru_maxrss).
double peak_rss_mb();

}  // namespace mpiddp
