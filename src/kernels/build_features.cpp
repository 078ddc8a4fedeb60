// Compiled with the build's own flags, so that the predefined macros say what the compiler
// may use anywhere in the program (kernels with a target attribute of their own aside).
#include "build_features.hpp"

namespace mpiddp::kernels {

namespace {
constexpr uint32_t on(bool defined, BuildFeature f) { return defined ? feature_bit(f) : 0u; }
#ifdef __SSE4_2__
constexpr bool kSse42 = true;
#else
constexpr bool kSse42 = false;
#endif
#ifdef __POPCNT__
constexpr bool kPopcnt = true;
#else
constexpr bool kPopcnt = false;
#endif
#ifdef __AVX__
constexpr bool kAvx = true;
#else
constexpr bool kAvx = false;
#endif
#ifdef __AVX2__
constexpr bool kAvx2 = true;
#else
constexpr bool kAvx2 = false;
#endif
#ifdef __FMA__
constexpr bool kFma = true;
#else
constexpr bool kFma = false;
#endif
#ifdef __BMI__
constexpr bool kBmi1 = true;
#else
constexpr bool kBmi1 = false;
#endif
#ifdef __BMI2__
constexpr bool kBmi2 = true;
#else
constexpr bool kBmi2 = false;
#endif
#ifdef __F16C__
constexpr bool kF16c = true;
#else
constexpr bool kF16c = false;
#endif
#ifdef __MOVBE__
constexpr bool kMovbe = true;
#else
constexpr bool kMovbe = false;
#endif
#ifdef __LZCNT__
constexpr bool kLzcnt = true;
#else
constexpr bool kLzcnt = false;
#endif
#ifdef __AVX512F__
constexpr bool kAvx512F = true;
#else
constexpr bool kAvx512F = false;
#endif
#ifdef __AVX512DQ__
constexpr bool kAvx512Dq = true;
#else
constexpr bool kAvx512Dq = false;
#endif
#ifdef __AVX512CD__
constexpr bool kAvx512Cd = true;
#else
constexpr bool kAvx512Cd = false;
#endif
#ifdef __AVX512BW__
constexpr bool kAvx512Bw = true;
#else
constexpr bool kAvx512Bw = false;
#endif
#ifdef __AVX512VL__
constexpr bool kAvx512Vl = true;
#else
constexpr bool kAvx512Vl = false;
#endif
#ifdef __AVX512VNNI__
constexpr bool kAvx512Vnni = true;
#else
constexpr bool kAvx512Vnni = false;
#endif
#ifdef __AVX512BF16__
constexpr bool kAvx512Bf16 = true;
#else
constexpr bool kAvx512Bf16 = false;
#endif
#ifdef __AMX_TILE__
constexpr bool kAmxTile = true;
#else
constexpr bool kAmxTile = false;
#endif
#ifdef __AMX_BF16__
constexpr bool kAmxBf16 = true;
#else
constexpr bool kAmxBf16 = false;
#endif
}  // namespace

// This file's macros are the feature test, not a guard on code: every build compiles it the
// same way, and only the values differ.
extern const uint32_t kBuildFeatures =
    on(kSse42, BuildFeature::kSse42) | on(kPopcnt, BuildFeature::kPopcnt) | on(kAvx, BuildFeature::kAvx) |
    on(kAvx2, BuildFeature::kAvx2) | on(kFma, BuildFeature::kFma) | on(kBmi1, BuildFeature::kBmi1) |
    on(kBmi2, BuildFeature::kBmi2) | on(kF16c, BuildFeature::kF16c) | on(kMovbe, BuildFeature::kMovbe) |
    on(kLzcnt, BuildFeature::kLzcnt) | on(kAvx512F, BuildFeature::kAvx512F) |
    on(kAvx512Dq, BuildFeature::kAvx512Dq) | on(kAvx512Cd, BuildFeature::kAvx512Cd) |
    on(kAvx512Bw, BuildFeature::kAvx512Bw) | on(kAvx512Vl, BuildFeature::kAvx512Vl) |
    on(kAvx512Vnni, BuildFeature::kAvx512Vnni) | on(kAvx512Bf16, BuildFeature::kAvx512Bf16) |
    on(kAmxTile, BuildFeature::kAmxTile) | on(kAmxBf16, BuildFeature::kAmxBf16);

#ifndef MPIDDP_BUILD_ARCH
#define MPIDDP_BUILD_ARCH "unknown"
#endif
extern const char kBuildArch[] = MPIDDP_BUILD_ARCH;

}  // namespace mpiddp::kernels
