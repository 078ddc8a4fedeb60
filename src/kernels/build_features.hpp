#pragma once
// The x86 features this build's own flags (-march) let the compiler use anywhere, as a bit
// mask (build_features.cpp, compiled with those flags), and their names. kernels/isa.cpp
// checks them against the CPU before anything else runs. Private to src/kernels.
#include <cstdint>

namespace mpiddp::kernels {

enum class BuildFeature : int {
  kSse42,
  kPopcnt,
  kAvx,
  kAvx2,
  kFma,
  kBmi1,
  kBmi2,
  kF16c,
  kMovbe,
  kLzcnt,
  kAvx512F,
  kAvx512Dq,
  kAvx512Cd,
  kAvx512Bw,
  kAvx512Vl,
  kAvx512Vnni,
  kAvx512Bf16,
  kAmxTile,
  kAmxBf16,
};
inline constexpr int kBuildFeatureCount = 19;

constexpr uint32_t feature_bit(BuildFeature f) { return uint32_t{1} << static_cast<int>(f); }

// As GCC's -m flags and /proc/cpuinfo spell them.
inline const char* build_feature_name(BuildFeature f) {
  constexpr const char* kNames[kBuildFeatureCount] = {
      "sse4.2",   "popcnt",   "avx",      "avx2",     "fma",         "bmi1",        "bmi2",
      "f16c",     "movbe",    "lzcnt",    "avx512f",  "avx512dq",    "avx512cd",    "avx512bw",
      "avx512vl", "avx512vnni", "avx512_bf16", "amx_tile", "amx_bf16"};
  return kNames[static_cast<int>(f)];
}

// Data, not code: reading them runs no instruction of the build's level.
extern const uint32_t kBuildFeatures;
extern const char kBuildArch[];

}  // namespace mpiddp::kernels
