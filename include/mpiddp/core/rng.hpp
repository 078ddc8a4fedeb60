#pragma once
// A small, fully specified random number generator. The standard library's distributions
// are implementation-defined, so the same seed would give different data and weights under
// libstdc++ and libc++; everything random in mpiddp goes through this class instead.
#include <cstdint>

namespace mpiddp {

// SplitMix64 finaliser: turns structured seeds (seed, epoch, stream id) into independent ones.
inline uint64_t mix_seed(uint64_t a, uint64_t b = 0) {
  uint64_t z = a + 0x9E3779B97F4A7C15ULL * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// xoshiro256** seeded through SplitMix64.
class Rng {
 public:
  explicit Rng(uint64_t seed);

  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal by the Box-Muller transform (both values of a pair are used).
  double normal();
  // Uniform integer in [0, n), unbiased (Lemire's method with rejection).
  uint64_t below(uint64_t n);

  // The full generator state, for checkpoints.
  struct State {
    uint64_t s[4];
    double cached_normal;
    bool has_cached_normal;
  };
  State state() const;
  void set_state(const State& state);

 private:
  uint64_t s_[4];
  double cached_normal_ = 0.0;
  bool has_cached_normal_ = false;
};

}  // namespace mpiddp
