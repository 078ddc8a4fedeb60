#include "mpiddp/core/memory.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdlib>

namespace mpiddp {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kCacheAlign = 64;
}  // namespace

void configure_allocator() {
  // For measuring what this saves (docs/benchmarks.md): glibc's defaults, untouched.
  if (const char* keep = std::getenv("MPIDDP_DEFAULT_MALLOC"); keep && *keep == '1') return;
  // See Note [allocate once, keep it mapped]. M_MMAP_THRESHOLD cannot be raised above
  // 32 MiB, and Open MPI's temporaries for an 84 MB reduction are larger, so mmap is
  // switched off altogether: everything comes from the heap, which is never trimmed.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // -1 (as size_t: the maximum): never return heap to the OS
  mallopt(M_TOP_PAD, 64 << 20);   // grow the heap in 64 MiB steps: fewer brk calls
}

void* allocate_buffer(size_t bytes) {
  const bool huge = bytes >= kHugePage;
  const size_t align = huge ? kHugePage : kCacheAlign;
  const size_t rounded = (bytes + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded == 0 ? align : rounded);
  if (!p) throw std::bad_alloc();
  // Advisory only: where transparent huge pages are off, this fails and nothing changes.
  if (huge) madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void free_buffer(void* p) noexcept { std::free(p); }

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace mpiddp
