#pragma once
// Finite-difference checks in float64: central differences with step h = 1e-6 have
// truncation error O(h^2) ~ 1e-12 and rounding error ~ eps/h ~ 1e-10, so analytic and
// numeric derivatives of smooth functions of O(1) values agree to ~1e-8 absolute.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

namespace mpiddp::testing {

constexpr double kStep = 1e-6;
constexpr double kTolerance = 1e-7;

// Checks d f / d values[i] == analytic[i] for every i, perturbing values in place.
inline void expect_gradient_matches(const std::function<double()>& f, double* values, long count,
                                    const double* analytic, const char* what) {
  for (long i = 0; i < count; ++i) {
    const double saved = values[i];
    values[i] = saved + kStep;
    const double up = f();
    values[i] = saved - kStep;
    const double down = f();
    values[i] = saved;
    const double numeric = (up - down) / (2 * kStep);
    EXPECT_NEAR(analytic[i], numeric, kTolerance * std::max(1.0, std::fabs(numeric)))
        << what << "[" << i << "]";
  }
}

// Deterministic pseudo-random values in [-1, 1).
inline std::vector<double> test_values(long count, unsigned seed) {
  std::vector<double> v(count);
  unsigned long long s = 0x9E3779B97F4A7C15ULL * (seed + 1);
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = static_cast<double>(s >> 11) * 0x1.0p-53 * 2.0 - 1.0;
  }
  return v;
}

}  // namespace mpiddp::testing
