#include "mpiddp/core/memory.hpp"

#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace mpiddp {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kCacheAlign = 64;

size_t round_up(size_t bytes, size_t align) { return (bytes + align - 1) / align * align; }

// What allocate_buffer maps for a buffer of 2 MiB or more: whole base pages.
size_t mapped_bytes(size_t bytes) { return round_up(bytes, static_cast<size_t>(sysconf(_SC_PAGESIZE))); }
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
  if (bytes < kHugePage) {
    void* p = std::aligned_alloc(kCacheAlign, round_up(std::max<size_t>(bytes, 1), kCacheAlign));
    if (!p) throw std::bad_alloc();
    return p;
  }
  // Map one huge page more than needed, then unmap the ends outside the 2 MiB-aligned part.
  // The buffer's whole 2 MiB pages become huge pages; a last partial one stays in 4 KiB
  // pages, so the buffer holds what it uses and not up to 2 MiB more (the kernel gives a
  // huge page only where one fits whole inside the mapping).
  const size_t rounded = mapped_bytes(bytes);
  void* mapped = mmap(nullptr, rounded + kHugePage, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapped == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<char*>(mapped);
  char* aligned = start + (kHugePage - reinterpret_cast<uintptr_t>(start) % kHugePage) % kHugePage;
  const auto head = static_cast<size_t>(aligned - start), tail = kHugePage - head;
  if (head > 0) munmap(start, head);
  if (tail > 0) munmap(aligned + rounded, tail);
  advise_huge_pages(aligned, rounded);
  return aligned;
}

void advise_huge_pages(void* p, size_t bytes) {
  if (bytes == 0) return;
  // madvise takes whole pages: from the page p starts in to the page the range ends in.
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  // Advisory only: where transparent huge pages are off, this fails and nothing changes.
  madvise(reinterpret_cast<void*>(start), end - start, MADV_HUGEPAGE);
}

void* allocate_zeroed_buffer(size_t bytes) {
  void* p = allocate_buffer(bytes);
  if (bytes < kHugePage) std::memset(p, 0, bytes);  // a fresh mapping is zero already
  return p;
}

void free_buffer(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes < kHugePage)
    std::free(p);
  else
    munmap(p, mapped_bytes(bytes));
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

namespace {
// One "Name: N kB" field of /proc/self/smaps_rollup in MiB; 0 where the kernel lacks it.
double smaps_rollup_mb(const std::string& field) {
  std::ifstream rollup("/proc/self/smaps_rollup");
  std::string name;
  double kib = 0.0;
  while (rollup >> name) {
    if (name == field) {
      rollup >> kib;
      return kib / 1024.0;
    }
    rollup.ignore(4096, '\n');
  }
  return 0.0;
}
}  // namespace

double current_pss_mb() { return smaps_rollup_mb("Pss:"); }

double shared_huge_page_mb() { return smaps_rollup_mb("ShmemPmdMapped:"); }

}  // namespace mpiddp
