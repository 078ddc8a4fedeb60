// GCC 12.2 with AVX-512 (Debian 12.2.0-14, -march=native on an AVX-512 machine, or just
// -mavx512f) turns the constant {1, 1, 0, 0} into a broadcast of 1 when its SLP vectorizer
// builds it: a silently wrong value. cmake/compiler_checks.cmake runs this with the build's
// flags and, when it fails, builds with -fno-tree-slp-vectorize.
#include <cstddef>
#include <vector>

// Out of line, so the optimiser cannot answer the check from the initialiser itself.
template <typename T>
__attribute__((noinline)) bool upper_half_is_zero(const std::vector<T>& v) {
  for (std::size_t i = v.size() / 2; i < v.size(); ++i)
    if (v[i] != T(0)) return false;
  return true;
}

int main() {
  const std::vector<double> d{1, 1, 0, 0};
  const std::vector<float> f{1, 1, 1, 1, 0, 0, 0, 0};
  return upper_half_is_zero(d) && upper_half_is_zero(f) ? 0 : 1;
}
