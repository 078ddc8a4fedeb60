// Attention's kernels on raw strided views (kernels/attention_naive.hpp, attention_tiled.hpp),
// apart from the layer: a head computed by hand; the tiled kernel against the naive one in
// float64, causal and not, with and without dropout's mask, T below, at, above and not a
// multiple of the 64-position tile, heads inside wider buffers; both kernels' gradients
// against central differences in float64; and multiply_tile, the products' seam, against a
// float64 loop for every operand form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

#include "mpiddp/kernels/attention_naive.hpp"
#include "mpiddp/kernels/attention_tiled.hpp"
#include "mpiddp/kernels/gemm.hpp"

namespace mpiddp::kernels {
namespace {

// A dropout mask for tests: whether value n of the head is kept follows a hash of n alone, so
// a tile drawn query by query and a whole (T, T) mask drawn at once agree, as the layer's do.
constexpr double kDrop = 0.25;
struct TestMaskSource {
  Index t;
};
template <typename T>
void fill_hashed_mask(const void* source, Index query, Index first, Index count, T* mask) {
  const Index t = static_cast<const TestMaskSource*>(source)->t;
  for (Index i = 0; i < count; ++i) {
    uint64_t n = static_cast<uint64_t>(query * t + first + i) * 0x9E3779B97F4A7C15ull;
    n ^= n >> 29;
    mask[i] = (n % 4 == 0) ? T(0) : static_cast<T>(1.0 / (1.0 - kDrop));
  }
}

// One head's q, k, v, out and their gradients: (D, T) views every `stride` values into
// buffers of their own, filled from a seed (the gaps filled too, so a kernel that read one
// would be caught).
template <typename T>
struct Head {
  Head(Index t_, Index d_, Index stride_, unsigned seed) : t(t_), d(d_), stride(stride_) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(0.0, 1.0);
    for (auto* m : {&q, &k, &v, &d_out}) {
      m->resize(static_cast<size_t>(stride * t));
      for (T& x : *m) x = static_cast<T>(normal(rng));
    }
    for (auto* m : {&out, &dq, &dk, &dv}) m->assign(static_cast<size_t>(stride * t), T(7));
  }
  StridedView<T> view(std::vector<T>& m) { return {m.data(), d, t, Eigen::OuterStride<>(stride)}; }
  ConstStridedView<T> cview(const std::vector<T>& m) const { return {m.data(), d, t, Eigen::OuterStride<>(stride)}; }

  Index t, d, stride;
  std::vector<T> q, k, v, d_out, out, dq, dk, dv;
};

// Forward, then backward with d_out, through one kernel.
template <typename T>
void run(const AttentionKernel<T>& kernel, Head<T>& x, bool causal, bool dropout) {
  const AttentionHead head{x.t, x.d, causal};
  std::vector<T> kept(kernel.kept_values(head));
  std::vector<std::byte> workspace(kernel.workspace_bytes(head, dropout) + 64);
  const TestMaskSource source{x.t};
  const AttentionMask<T> mask{&fill_hashed_mask<T>, &source};
  const AttentionMask<T>* m = dropout ? &mask : nullptr;
  kernel.forward(x.view(x.out), kept.data(), x.cview(x.q), x.cview(x.k), x.cview(x.v), head, m, workspace.data());
  kernel.backward(x.view(x.dq), x.view(x.dk), x.view(x.dv), x.cview(x.d_out), x.cview(x.out), x.cview(x.q),
                  x.cview(x.k), x.cview(x.v), kept.data(), head, m, workspace.data());
}

// T = 2, D = 1, causal, by hand: q = (1, 2), k = (0, ln(3) / 2), v = (4, 8). Query 0 sees key
// 0 alone: out_0 = v_0 = 4. Query 1's scores are q_1 k_j = (0, ln 3), its probabilities
// (1/4, 3/4), out_1 = 4/4 + 3 8/4 = 7. With d_out = (0, 1): dv = P^T d_out = (1/4, 3/4);
// dP(j, 1) = v_j = (4, 8), sum_j P dP = 7, dS(j, 1) = P (dP - 7) = (-3/4, 3/4), so
// dq_1 = sum_j k_j dS(j, 1) = 3 ln(3) / 8, dk = q_1 dS(., 1) = (-3/2, 3/2), and dq_0 = 0 (a
// single key's softmax is constant).
TEST(AttentionKernels, OneHeadByHand) {
  for (const auto& kernel : {naive_attention<double>(), tiled_attention<double>()}) {
    Head<double> x(2, 1, 1, 0);
    x.q = {1, 2};
    x.k = {0, std::log(3.0) / 2};
    x.v = {4, 8};
    x.d_out = {0, 1};
    run(kernel, x, true, false);
    EXPECT_NEAR(x.out[0], 4.0, 1e-15);
    EXPECT_NEAR(x.out[1], 7.0, 1e-14);
    EXPECT_NEAR(x.dv[0], 0.25, 1e-15);
    EXPECT_NEAR(x.dv[1], 0.75, 1e-15);
    EXPECT_NEAR(x.dq[0], 0.0, 1e-15);
    EXPECT_NEAR(x.dq[1], 3 * std::log(3.0) / 8, 1e-14);
    EXPECT_NEAR(x.dk[0], -1.5, 1e-14);
    EXPECT_NEAR(x.dk[1], 1.5, 1e-14);
  }
}

// Largest |a - b| over a head's (D, T) values, and the gaps between columns left as they were.
double max_difference(const Head<double>& a, const std::vector<double>& ma, const std::vector<double>& mb) {
  double worst = 0;
  for (Index i = 0; i < a.t; ++i)
    for (Index r = 0; r < a.stride; ++r) {
      const size_t at = static_cast<size_t>(i * a.stride + r);
      if (r < a.d) worst = std::max(worst, std::abs(ma[at] - mb[at]));
      else EXPECT_EQ(ma[at], 7.0) << "a gap between columns was written";
    }
  return worst;
}

// The running softmax reorders float64 sums only: the two kernels agree to 1e-12 on values of
// order 1 (T at most 130 terms per sum, each rounding at 2^-53).
TEST(AttentionKernels, TiledEqualsNaive) {
  for (const Index t : {1, 5, 63, 64, 65, 100, 130})
    for (const bool causal : {true, false})
      for (const bool dropout : {false, true}) {
        Head<double> naive(t, 8, 24, 3), tiled(t, 8, 24, 3);
        run(naive_attention<double>(), naive, causal, dropout);
        run(tiled_attention<double>(), tiled, causal, dropout);
        SCOPED_TRACE("T " + std::to_string(t) + (causal ? " causal" : " full") + (dropout ? " dropout" : ""));
        EXPECT_LT(max_difference(naive, naive.out, tiled.out), 1e-12);
        EXPECT_LT(max_difference(naive, naive.dq, tiled.dq), 1e-12);
        EXPECT_LT(max_difference(naive, naive.dk, tiled.dk), 1e-12);
        EXPECT_LT(max_difference(naive, naive.dv, tiled.dv), 1e-12);
      }
}

// The gradients against central differences of L = sum(out * d_out): step 1e-5 leaves a
// truncation error of order h^2 = 1e-10 times the third derivative, rounding of order
// 1e-16 / 1e-5 = 1e-11; 1e-7 is well clear of both and far below a wrong term (order 1).
TEST(AttentionKernels, GradientsMatchCentralDifferences) {
  for (const auto& kernel : {naive_attention<double>(), tiled_attention<double>()})
    for (const bool causal : {true, false})
      for (const bool dropout : {false, true}) {
        const Index t = 70, d = 3;
        Head<double> x(t, d, 5, 11);
        run(kernel, x, causal, dropout);
        const auto loss = [&](Head<double> probe) {
          run(kernel, probe, causal, dropout);
          double sum = 0;
          for (Index i = 0; i < t; ++i)
            for (Index r = 0; r < d; ++r) sum += probe.out[i * 5 + r] * probe.d_out[i * 5 + r];
          return sum;
        };
        const double h = 1e-5;
        for (const int which : {0, 1, 2})
          for (const Index at : {Index(0), Index(1 * 5 + 2), Index(33 * 5 + 1), Index(64 * 5), Index(69 * 5 + 2)}) {
            Head<double> plus = x, minus = x;
            std::vector<double>& p = which == 0 ? plus.q : which == 1 ? plus.k : plus.v;
            std::vector<double>& m = which == 0 ? minus.q : which == 1 ? minus.k : minus.v;
            p[at] += h;
            m[at] -= h;
            const double numeric = (loss(plus) - loss(minus)) / (2 * h);
            const double analytic = (which == 0 ? x.dq : which == 1 ? x.dk : x.dv)[at];
            EXPECT_NEAR(analytic, numeric, 1e-7) << "input " << "qkv"[which] << " value " << at
                                                 << (causal ? " causal" : " full") << (dropout ? " dropout" : "");
          }
      }
}

// multiply_tile against a float64 loop, every op pair, overwrite and add, on strided views.
TEST(AttentionKernels, MultiplyTileEveryForm) {
  const Index m = 5, n = 7, k = 3;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (const Op op_a : {Op::kNone, Op::kTranspose})
    for (const Op op_b : {Op::kNone, Op::kTranspose})
      for (const Accumulate mode : {Accumulate::kOverwrite, Accumulate::kAdd}) {
        const Index a_rows = op_a == Op::kNone ? m : k, a_cols = op_a == Op::kNone ? k : m;
        const Index b_rows = op_b == Op::kNone ? k : n, b_cols = op_b == Op::kNone ? n : k;
        std::vector<float> a(static_cast<size_t>((a_rows + 2) * a_cols)), b(static_cast<size_t>((b_rows + 1) * b_cols)),
            c(static_cast<size_t>((m + 3) * n));
        for (auto* v : {&a, &b, &c})
          for (float& x : *v) x = u(rng);
        const std::vector<float> c0 = c;
        multiply_tile<float>({c.data(), m, n, Eigen::OuterStride<>(m + 3)}, {a.data(), a_rows, a_cols, Eigen::OuterStride<>(a_rows + 2)},
                             op_a, {b.data(), b_rows, b_cols, Eigen::OuterStride<>(b_rows + 1)}, op_b, mode);
        for (Index j = 0; j < n; ++j)
          for (Index i = 0; i < m; ++i) {
            double sum = mode == Accumulate::kAdd ? c0[j * (m + 3) + i] : 0.0;
            for (Index l = 0; l < k; ++l) {
              const double av = op_a == Op::kNone ? a[l * (a_rows + 2) + i] : a[i * (a_rows + 2) + l];
              const double bv = op_b == Op::kNone ? b[j * (b_rows + 1) + l] : b[l * (b_rows + 1) + j];
              sum += av * bv;
            }
            EXPECT_NEAR(c[j * (m + 3) + i], sum, 1e-5);
          }
        for (Index j = 0; j < n; ++j)
          for (Index i = m; i < m + 3; ++i) EXPECT_EQ(c[j * (m + 3) + i], c0[j * (m + 3) + i]);
      }
}

}  // namespace
}  // namespace mpiddp::kernels
