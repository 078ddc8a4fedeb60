// CPUID, the OS's register state, the levels, the cap, and the start-up check that the CPU
// runs what the build needs. CMakeLists.txt compiles this file alone for plain x86-64
// (-march=x86-64), whatever the build's baseline: it must run on a CPU below the baseline
// far enough to say so.
#include "mpiddp/kernels/isa.hpp"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

#include "mpiddp/core/error.hpp"
#include "build_features.hpp"

// Note [kernels per instruction set]
// One binary serves every x86-64 CPU at or above the build's baseline (x86-64-v3 in the
// portable build: docs/isa.md says why). Kernels of our own (the grid product, the grid's
// conversion, the sums) have a portable variant and variants for higher levels, each compiled
// with __attribute__((target)) in the same file on every build host: no variant depends on the
// host's -march, so an AVX2-only machine compiles the AVX-512 code too. A Dispatched table per
// kernel picks the best variant at or below active_isa(), which is the CPU's best level (CPUID,
// and XGETBV for the registers the OS saves) unless compute.isa caps it. Every variant gives the
// same bits as its portable reference (each output a fixed chain of operations whose order
// follows the shapes alone, never the vector width), so a cap changes speed, never a result;
// tests/kernels/isa_test.cpp checks every level the CPU has against the reference.

namespace mpiddp::kernels {
namespace {

struct Cpu {
  uint32_t features = 0;  // BuildFeature bits this CPU and its OS run
  bool amx_permitted = false;
};

bool bit(uint32_t word, int b) { return ((word >> b) & 1u) != 0; }

uint64_t xgetbv0() {
  uint32_t low = 0, high = 0;
  // XGETBV by its bytes: no -mxsave needed, and this file is compiled for plain x86-64.
  asm volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(low), "=d"(high) : "c"(0));
  return (uint64_t{high} << 32) | low;
}

Cpu read_cpu() {
  Cpu cpu;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return cpu;
  const bool osxsave = bit(c, 27);
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  // The OS saves XMM and YMM (bits 1, 2); opmask, ZMM_Hi256 and Hi16_ZMM (5, 6, 7); the AMX
  // tile configuration and data (17, 18). A CPU feature whose registers the OS does not save
  // is a feature the process cannot use.
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = os_ymm && (xcr0 & 0xE0) == 0xE0;
  const bool os_tiles = (xcr0 & 0x60000) == 0x60000;
  auto set = [&](BuildFeature f, bool on) {
    if (on) cpu.features |= feature_bit(f);
  };
  set(BuildFeature::kSse42, bit(c, 20));
  set(BuildFeature::kPopcnt, bit(c, 23));
  set(BuildFeature::kFma, bit(c, 12) && os_ymm);
  set(BuildFeature::kMovbe, bit(c, 22));
  set(BuildFeature::kAvx, bit(c, 28) && os_ymm);
  set(BuildFeature::kF16c, bit(c, 29) && os_ymm);
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    set(BuildFeature::kBmi1, bit(b, 3));
    set(BuildFeature::kAvx2, bit(b, 5) && os_ymm);
    set(BuildFeature::kBmi2, bit(b, 8));
    set(BuildFeature::kAvx512F, bit(b, 16) && os_zmm);
    set(BuildFeature::kAvx512Dq, bit(b, 17) && os_zmm);
    set(BuildFeature::kAvx512Cd, bit(b, 28) && os_zmm);
    set(BuildFeature::kAvx512Bw, bit(b, 30) && os_zmm);
    set(BuildFeature::kAvx512Vl, bit(b, 31) && os_zmm);
    set(BuildFeature::kAvx512Vnni, bit(c, 11) && os_zmm);
    set(BuildFeature::kAmxBf16, bit(d, 22) && os_tiles);
    set(BuildFeature::kAmxTile, bit(d, 24) && os_tiles);
    const unsigned subleaves = a;
    if (subleaves >= 1) {
      __cpuid_count(7, 1, a, b, c, d);
      set(BuildFeature::kAvx512Bf16, bit(a, 5) && os_zmm);
    }
  }
  if (__get_cpuid(0x80000001u, &a, &b, &c, &d)) set(BuildFeature::kLzcnt, bit(c, 5));
  if ((cpu.features & feature_bit(BuildFeature::kAmxTile)) != 0) {
    // Linux hands a process the AMX tile state only when asked (ARCH_REQ_XCOMP_PERM for
    // XFEATURE_XTILEDATA); without it the first tile instruction is a SIGILL.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    cpu.amx_permitted = syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }
  return cpu;
}

const Cpu& this_cpu() {
  static const Cpu cpu = read_cpu();
  return cpu;
}

// The features each level needs beyond the level below it.
struct LevelNeeds {
  Isa level;
  const char* name;
  uint32_t features;
};
constexpr uint32_t bits(std::initializer_list<BuildFeature> list) {
  uint32_t m = 0;
  for (BuildFeature f : list) m |= feature_bit(f);
  return m;
}
constexpr LevelNeeds kLevels[kIsaLevels] = {
    {Isa::kBaseline, "baseline", 0},  // the build's own flags: checked at start-up
    {Isa::kAvx2, "avx2", bits({BuildFeature::kAvx, BuildFeature::kAvx2, BuildFeature::kFma})},
    {Isa::kAvx512, "avx512",
     bits({BuildFeature::kAvx512F, BuildFeature::kAvx512Dq, BuildFeature::kAvx512Bw, BuildFeature::kAvx512Vl})},
    {Isa::kAvx512Bf16, "avx512_bf16", bits({BuildFeature::kAvx512Bf16})},
    {Isa::kAmx, "amx", bits({BuildFeature::kAmxTile, BuildFeature::kAmxBf16})},
};

// The names of the features in `needed` but not in `have`, comma-separated, into text (C
// strings only: the start-up check runs before the program's own code may).
void missing_names(uint32_t needed, uint32_t have, char (&text)[256]) {
  text[0] = '\0';
  for (int f = 0; f < kBuildFeatureCount; ++f) {
    const uint32_t m = uint32_t{1} << f;
    if ((needed & m) == 0 || (have & m) != 0) continue;
    if (text[0] != '\0') std::strncat(text, ", ", sizeof text - std::strlen(text) - 1);
    std::strncat(text, build_feature_name(static_cast<BuildFeature>(f)), sizeof text - std::strlen(text) - 1);
  }
}

std::atomic<int> g_cap{kIsaLevels - 1};

// Before any other constructor of the program (priority 101, the first an application may
// take): code compiled for the baseline may run in any static initialiser, and on a CPU
// without, say, AVX2 that is a SIGILL with no word of why.
__attribute__((constructor(101))) void check_cpu_runs_the_build() {
  char lacking[256];
  missing_names(kBuildFeatures, this_cpu().features, lacking);
  if (lacking[0] == '\0') return;
  std::fprintf(stderr,
               "mpiddp: this CPU lacks %s, which this build needs: it was compiled for %s. Kernels above that "
               "are chosen at run time, but the rest of the program is compiled for it. Build for this CPU "
               "with cmake -DMPIDDP_BASELINE=x86-64-v2 (docs/isa.md).\n",
               lacking, build_arch());
  std::fflush(stderr);
  _exit(kExitCpu);
}

}  // namespace

const char* isa_name(Isa level) { return kLevels[static_cast<int>(level)].name; }

std::vector<std::string> isa_names() {
  std::vector<std::string> names;
  for (const LevelNeeds& l : kLevels) names.emplace_back(l.name);
  return names;
}

std::string isa_names_text(const std::vector<Isa>& levels, const char* separator) {
  std::string text;
  for (Isa level : levels) text += std::string(text.empty() ? "" : separator) + isa_name(level);
  return text;
}

bool find_isa(const std::string& name, Isa* level) {
  for (const LevelNeeds& l : kLevels)
    if (name == l.name) {
      *level = l.level;
      return true;
    }
  return false;
}

std::string cpu_lacks(Isa level) {
  uint32_t needed = 0;
  for (int l = 0; l <= static_cast<int>(level); ++l) needed |= kLevels[l].features;
  char lacking[256];
  missing_names(needed, this_cpu().features, lacking);
  std::string text = lacking;
  if (text.empty() && level == Isa::kAmx && !this_cpu().amx_permitted)
    text = "the OS's permission for the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM refused)";
  return text;
}

bool cpu_runs(Isa level) { return cpu_lacks(level).empty(); }

std::vector<Isa> cpu_isas() {
  std::vector<Isa> levels;
  for (const LevelNeeds& l : kLevels) {
    if (!cpu_runs(l.level)) break;
    levels.push_back(l.level);
  }
  return levels;
}

Isa cpu_best_isa() { return cpu_isas().back(); }

std::vector<Isa> compiled_isas() {
  // The levels of the variants in src/kernels (grid_product.cpp, fixed_point.cpp,
  // bf16_product.cpp, distributed/sum_kernels.cpp) and the bf16 tiles' (bf16_tile_product.cpp).
  return {Isa::kBaseline, Isa::kAvx2, Isa::kAvx512, Isa::kAvx512Bf16};
}

const char* build_arch() { return kBuildArch; }

Isa active_isa() {
  static const Isa best = cpu_best_isa();
  const int cap = g_cap.load(std::memory_order_relaxed);
  return static_cast<int>(best) < cap ? best : static_cast<Isa>(cap);
}

void cap_isa(Isa cap) { g_cap.store(static_cast<int>(cap), std::memory_order_relaxed); }

void uncap_isa() { g_cap.store(kIsaLevels - 1, std::memory_order_relaxed); }

}  // namespace mpiddp::kernels
