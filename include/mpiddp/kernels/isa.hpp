#pragma once
// Instruction-set levels and the run-time choice of a kernel's variant (Note [kernels per
// instruction set] in src/kernels/isa.cpp; docs/isa.md). Every variant of every kernel is
// compiled on every build host; which one runs is decided by the CPU that runs, capped by
// compute.isa.
#include <array>
#include <string>
#include <vector>

namespace mpiddp::kernels {

// Ordered: a CPU that has a level has every level below it.
//   kBaseline   what the build itself is compiled for (x86-64-v3 in the portable build)
//   kAvx2       AVX2 and FMA
//   kAvx512     AVX-512 F, DQ, BW and VL, with the OS saving the ZMM and mask registers
//   kAvx512Bf16 kAvx512 and AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16)
//   kAmx        kAvx512Bf16, AMX-TILE and AMX-BF16, with the OS granting the tile state
enum class Isa : int { kBaseline = 0, kAvx2, kAvx512, kAvx512Bf16, kAmx };
inline constexpr int kIsaLevels = 5;

// "baseline", "avx2", "avx512", "avx512_bf16", "amx": the names compute.isa takes.
const char* isa_name(Isa level);
std::vector<std::string> isa_names();
// The levels' names joined by `separator`, e.g. "baseline avx2 avx512".
std::string isa_names_text(const std::vector<Isa>& levels, const char* separator);
bool find_isa(const std::string& name, Isa* level);

// Every level this CPU and its OS run, lowest first (CPUID and XGETBV, read once).
std::vector<Isa> cpu_isas();
Isa cpu_best_isa();
bool cpu_runs(Isa level);
// The features of `level` this CPU or its OS lacks, e.g. "avx512_bf16"; empty when it runs it.
std::string cpu_lacks(Isa level);
// The levels at which some kernel of this build has a variant of its own.
std::vector<Isa> compiled_isas();
// The build's own flags (-march): "x86-64-v3", "native", ...
const char* build_arch();

// The level kernels run at: the CPU's best, or `cap` after cap_isa. Dispatch reads it at
// every call, so a cap set before the first step (compute.isa) holds for the whole run.
Isa active_isa();
// No kernel variant above `cap` runs from now on. The caller has checked cpu_runs(cap).
void cap_isa(Isa cap);
// Back to the CPU's best.
void uncap_isa();

// A kernel's variants, one slot per level, nullptr where it has none of its own (slot
// kBaseline never is). at(level) is the best variant at or below `level`.
template <typename Fn>
class Dispatched {
 public:
  constexpr explicit Dispatched(std::array<Fn, kIsaLevels> variants) : variants_(variants) {}
  Fn at(Isa level) const {
    for (int l = static_cast<int>(level); l > 0; --l)
      if (variants_[static_cast<size_t>(l)] != nullptr) return variants_[static_cast<size_t>(l)];
    return variants_[0];
  }
  // Whether the kernel has a variant of its own at `level` (not one borrowed from below).
  bool has(Isa level) const { return variants_[static_cast<size_t>(level)] != nullptr; }
  Fn operator()() const { return at(active_isa()); }

 private:
  std::array<Fn, kIsaLevels> variants_;
};

}  // namespace mpiddp::kernels
