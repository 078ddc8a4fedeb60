#pragma once
// The target attributes of our kernels' variants (Note [kernels per instruction set] in
// src/kernels/isa.cpp): each level's functions carry one, so every build host compiles every
// level, whatever its -march. A function called from a variant either carries the same
// attribute or is inlined into it (kAlwaysInline); anything else runs at the build's baseline.
// Private to src/.

#define MPIDDP_TARGET_AVX2 __attribute__((target("avx2,fma,bmi,bmi2,f16c,popcnt")))
// GCC's tuning prefers 256-bit vectors in loops it vectorises itself; the AVX-512 variants
// ask for 512. Clang takes no such option in a target attribute (it would ignore the whole
// attribute), so it is GCC's alone: a compiler's spelling, not the host's instruction set.
#if defined(__clang__)
#define MPIDDP_TARGET_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,bmi,bmi2,f16c,popcnt")))
#else
#define MPIDDP_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,bmi,bmi2,f16c,popcnt,prefer-vector-width=512")))
#endif
// AVX512_BF16's instructions (vdpbf16ps) on top of the AVX-512 variants' (kernels of level
// kAvx512Bf16: bf16_tile_product.cpp).
#if defined(__clang__)
#define MPIDDP_TARGET_AVX512_BF16 \
  __attribute__((target("avx512bf16,avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,bmi,bmi2,f16c,popcnt")))
#else
#define MPIDDP_TARGET_AVX512_BF16 \
  __attribute__((target("avx512bf16,avx512f,avx512dq,avx512bw,avx512vl,avx2,fma,bmi,bmi2,f16c,popcnt,prefer-vector-width=512")))
#endif
// A portable body that each variant inlines, so that it is compiled at the variant's level.
#define MPIDDP_ALWAYS_INLINE inline __attribute__((always_inline))

// The variants of a portable body at every level above: NAME_portable, NAME_avx2 and
// NAME_avx512, templates on T, each inlining BODY<T> (declared MPIDDP_ALWAYS_INLINE).
#define MPIDDP_VARIANTS_OF(name, body, Return, Params, Args)                    \
  template <typename T>                                                         \
  Return name##_portable Params {                                               \
    return body<T> Args;                                                        \
  }                                                                             \
  template <typename T>                                                         \
  MPIDDP_TARGET_AVX2 Return name##_avx2 Params {                                \
    return body<T> Args;                                                        \
  }                                                                             \
  template <typename T>                                                         \
  MPIDDP_TARGET_AVX512 Return name##_avx512 Params {                            \
    return body<T> Args;                                                        \
  }
