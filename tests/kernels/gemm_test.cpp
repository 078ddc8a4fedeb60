// Every matrix-product library built in computes the same products as a plain triple loop in
// long double, for every operand orientation and both modes; Eigen's backend keeps exactly the
// bits of the Eigen expressions the layers used before there was a choice.
#include "mpiddp/kernels/gemm.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace mpiddp::kernels {
namespace {

// Restores the process's backend after each test: the others run on Eigen.
class GemmTest : public ::testing::Test {
 protected:
  void TearDown() override {
    use_one_thread_below(0);
    use_gemm_backend(GemmBackend::kEigen, 1);
  }
};

template <typename T>
std::vector<T> random_values(Index count, unsigned seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<T> v(count);
  for (T& x : v) x = static_cast<T>(uniform(engine));
  return v;
}

// op(a)(i, p) of a column-major (rows, cols) array.
template <typename T>
long double element(const std::vector<T>& a, Index rows, Op op, Index i, Index p) {
  return op == Op::kTranspose ? a[i * rows + p] : a[p * rows + i];
}

// The stored (rows, cols) of a product's operands: op(a) is (m, k), op(b) (k, n).
struct OperandShapes {
  Index a_rows, a_cols, b_rows, b_cols;
};
OperandShapes operand_shapes_of(const GemmShape& s) {
  const bool ta = s.op_a == Op::kTranspose, tb = s.op_b == Op::kTranspose;
  return {ta ? s.k : s.m, ta ? s.m : s.k, tb ? s.n : s.k, tb ? s.k : s.n};
}

template <typename T>
void check_backend(GemmBackend backend, double tolerance) {
  const Index m = 37, n = 23, k = 51;
  for (Op op_a : {Op::kNone, Op::kTranspose})
    for (Op op_b : {Op::kNone, Op::kTranspose})
      for (Accumulate mode : {Accumulate::kOverwrite, Accumulate::kAdd}) {
        const auto [a_rows, a_cols, b_rows, b_cols] = operand_shapes_of({m, n, k, op_a, op_b});
        const auto a = random_values<T>(a_rows * a_cols, 1), b = random_values<T>(b_rows * b_cols, 2);
        const auto c0 = random_values<T>(m * n, 3);
        std::vector<T> c = c0;
        use_gemm_backend(backend, 1);
        multiply(MatrixView<T>(c.data(), m, n), ConstMatrixView<T>(a.data(), a_rows, a_cols), op_a,
                 ConstMatrixView<T>(b.data(), b_rows, b_cols), op_b, mode);
        for (Index j = 0; j < n; ++j)
          for (Index i = 0; i < m; ++i) {
            long double expected = mode == Accumulate::kAdd ? c0[j * m + i] : 0.0L;
            for (Index p = 0; p < k; ++p)
              expected += element(a, a_rows, op_a, i, p) * element(b, b_rows, op_b, p, j);
            ASSERT_NEAR(static_cast<double>(c[j * m + i]), static_cast<double>(expected), tolerance)
                << gemm_backend_name(backend) << " " << gemm_shape_text({m, n, k, op_a, op_b})
                << (mode == Accumulate::kAdd ? " +=" : " =") << " at (" << i << ", " << j << ")";
          }
        // The same product again gives the same bits: a run is repeatable.
        std::vector<T> again = c0;
        multiply(MatrixView<T>(again.data(), m, n), ConstMatrixView<T>(a.data(), a_rows, a_cols), op_a,
                 ConstMatrixView<T>(b.data(), b_rows, b_cols), op_b, mode);
        ASSERT_EQ(again, c) << gemm_backend_name(backend);
      }
}

TEST_F(GemmTest, EveryBackendMatchesALongDoubleReference) {
  for (GemmBackend backend : available_gemm_backends()) {
    SCOPED_TRACE(gemm_backend_name(backend));
    check_backend<float>(backend, 2e-5);   // 51 products of values below 1: a few float ulps
    check_backend<double>(backend, 1e-13);
  }
}

// `count` values that end where an inaccessible page begins: a library that reads or writes
// one element past an operand faults. A flat buffer of 2 MiB or more ends at its last 4 KiB
// page (core/memory.hpp's allocate_buffer), so an operand at the end of one has no slack.
template <typename T>
class EndOfPage {
 public:
  explicit EndOfPage(const std::vector<T>& values) : count_(values.size()) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    bytes_ = (count_ * sizeof(T) + page - 1) / page * page + page;
    void* mapped = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    base_ = static_cast<char*>(mapped);
    // Without the guard the test could not fail: refuse to run without it.
    if (mprotect(base_ + bytes_ - page, page, PROT_NONE) != 0) {
      munmap(base_, bytes_);
      throw std::runtime_error("EndOfPage: mprotect failed");
    }
    data_ = reinterpret_cast<T*>(base_ + bytes_ - page) - count_;
    std::memcpy(data_, values.data(), count_ * sizeof(T));
  }
  ~EndOfPage() { munmap(base_, bytes_); }
  EndOfPage(const EndOfPage&) = delete;
  EndOfPage& operator=(const EndOfPage&) = delete;
  T* data() { return data_; }
  std::vector<T> values() const { return std::vector<T>(data_, data_ + count_); }

 private:
  size_t count_, bytes_ = 0;
  char* base_ = nullptr;
  T* data_ = nullptr;
};

template <typename T>
void check_inside_operands(GemmBackend backend, GemmShape shape) {
  const auto [m, n, k, op_a, op_b] = shape;
  const auto [a_rows, a_cols, b_rows, b_cols] = operand_shapes_of(shape);
  const auto a_values = random_values<T>(a_rows * a_cols, 7), b_values = random_values<T>(b_rows * b_cols, 8);
  const auto c_values = random_values<T>(m * n, 9);
  EndOfPage<T> a(a_values), b(b_values), c(c_values);
  std::vector<T> expected = c_values;
  use_gemm_backend(backend, 1);
  multiply(MatrixView<T>(c.data(), m, n), ConstMatrixView<T>(a.data(), a_rows, a_cols), op_a,
           ConstMatrixView<T>(b.data(), b_rows, b_cols), op_b, Accumulate::kAdd);
  multiply(MatrixView<T>(expected.data(), m, n), ConstMatrixView<T>(a_values.data(), a_rows, a_cols), op_a,
           ConstMatrixView<T>(b_values.data(), b_rows, b_cols), op_b, Accumulate::kAdd);
  const std::vector<T> got = c.values();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(static_cast<double>(got[i]), static_cast<double>(expected[i]), 1e-3 * std::sqrt(double(k)))
        << gemm_backend_name(backend) << " " << gemm_shape_text(shape) << " at " << i;
}

TEST_F(GemmTest, EveryBackendStaysInsideOperandsThatEndAPage) {
  // Odd sizes and sizes big enough for the libraries' packing paths, whose operands are whole
  // multiples of 4 KiB, in every orientation; and a layer of 10 outputs. Small enough for
  // the valgrind stage.
  std::vector<GemmShape> shapes = {{10, 64, 256, Op::kTranspose, Op::kNone}};
  for (Op op_a : {Op::kNone, Op::kTranspose})
    for (Op op_b : {Op::kNone, Op::kTranspose}) {
      shapes.push_back({37, 23, 51, op_a, op_b});
      shapes.push_back({256, 64, 192, op_a, op_b});
    }
  for (GemmBackend backend : available_gemm_backends())
    for (const GemmShape& shape : shapes) {
      SCOPED_TRACE(std::string(gemm_backend_name(backend)) + " " + gemm_shape_text(shape));
      check_inside_operands<float>(backend, shape);
      check_inside_operands<double>(backend, shape);
    }
}

TEST_F(GemmTest, EigenBackendKeepsTheBitsOfEigensExpressions) {
  const Index m = 64, n = 48, k = 96;
  const auto a = random_values<float>(k * m, 4), b = random_values<float>(k * n, 5);
  const auto bias = random_values<float>(m * n, 6);
  std::vector<float> ours = bias;
  Matrix<float> expected = Eigen::Map<const Matrix<float>>(bias.data(), m, n);
  use_gemm_backend(GemmBackend::kEigen, 1);
  multiply(MatrixView<float>(ours.data(), m, n), ConstMatrixView<float>(a.data(), k, m), Op::kTranspose,
           ConstMatrixView<float>(b.data(), k, n), Op::kNone, Accumulate::kAdd);
  expected.noalias() += ConstMatrixView<float>(a.data(), k, m).transpose() * ConstMatrixView<float>(b.data(), k, n);
  EXPECT_EQ(0, std::memcmp(ours.data(), expected.data(), ours.size() * sizeof(float)));
}

TEST_F(GemmTest, ASmallProductRunsOnOneThreadAndABigOneOnTheRanksCount) {
  // Note [threads per product]: with a limit of 1000 multiply-adds, 10 x 10 x 9 (900) runs on
  // one thread and 10 x 10 x 10 on both; Eigen's count says which, and every library's
  // product stays the reference's.
  for (GemmBackend backend : available_gemm_backends()) {
    SCOPED_TRACE(gemm_backend_name(backend));
    use_gemm_backend(backend, 2);
    use_one_thread_below(1000);
    for (const Index k : {Index(9), Index(10), Index(9)}) {
      const auto a = random_values<float>(10 * k, 4), b = random_values<float>(k * 10, 5);
      std::vector<float> c(100);
      multiply(MatrixView<float>(c.data(), 10, 10), ConstMatrixView<float>(a.data(), 10, k), Op::kNone,
               ConstMatrixView<float>(b.data(), k, 10), Op::kNone, Accumulate::kOverwrite);
      EXPECT_EQ(Eigen::nbThreads(), k == 10 ? 2 : 1) << "k " << k;
      for (Index i = 0; i < 10; ++i)
        for (Index j = 0; j < 10; ++j) {
          long double expected = 0;
          for (Index p = 0; p < k; ++p) expected += element(a, 10, Op::kNone, i, p) * element(b, k, Op::kNone, p, j);
          EXPECT_NEAR(c[j * 10 + i], static_cast<double>(expected), 1e-5);
        }
    }
  }
  Eigen::setNbThreads(1);
}

TEST_F(GemmTest, NamesAndAvailability) {
  const auto found = available_gemm_backends();
  ASSERT_FALSE(found.empty());
  EXPECT_EQ(found.front(), GemmBackend::kEigen);
  GemmBackend backend{};
  EXPECT_TRUE(find_gemm_backend("eigen", &backend));
  EXPECT_EQ(backend, GemmBackend::kEigen);
  EXPECT_FALSE(find_gemm_backend("mkl", &backend));
  EXPECT_EQ(gemm_backend_names(), (std::vector<std::string>{"eigen", "openblas", "blis", "onednn"}));
  EXPECT_EQ(gemm_shape_text({1024, 128, 784, Op::kTranspose, Op::kNone}), "1024x128x784 TN");
}

// OpenBLAS and BLIS both export cblas_*; each backend must run its own library's code.
TEST_F(GemmTest, EachLibraryAnswersForItself) {
  for (GemmBackend backend : available_gemm_backends()) {
    const std::string library = gemm_backend_library(backend);
    SCOPED_TRACE(library);
    const char* expected = backend == GemmBackend::kOpenBlas ? "openblas"
                           : backend == GemmBackend::kBlis   ? "blis"
                           : backend == GemmBackend::kOneDnn ? "dnnl"
                                                             : "Eigen";
    EXPECT_NE(library.find(expected), std::string::npos);
  }
}

TEST(TypicalProduct, IsTheProductThatHoldsTheMiddleMultiplyAdd) {
  EXPECT_EQ(typical_product_multiply_adds({}), 0.0);
  // 1000 products of 1 000 multiply-adds (1 M in all) and one of 8 M: the middle
  // multiply-add lies in the big one, though it is one call in 1001.
  const std::vector<GemmCall> mixed = {{{10, 10, 10}, 1000, GemmRole::kForward},
                                       {{200, 200, 200}, 1, GemmRole::kForward}};
  EXPECT_EQ(typical_product_multiply_adds(mixed), 8e6);
  // Three times as much work in the small ones: the typical product is small.
  const std::vector<GemmCall> small = {{{10, 10, 10}, 24000, GemmRole::kForward},
                                       {{200, 200, 200}, 1, GemmRole::kForward}};
  EXPECT_EQ(typical_product_multiply_adds(small), 1e3);
  // Order does not matter; exactly half the work at or below a size chooses it.
  const std::vector<GemmCall> halves = {{{20, 20, 20}, 1, GemmRole::kForward}, {{10, 10, 10}, 8, GemmRole::kForward}};
  EXPECT_EQ(typical_product_multiply_adds(halves), 1e3);
}

}  // namespace
}  // namespace mpiddp::kernels
