#include "mpiddp/nn/loss.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "../support/gradient_check.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::expect_gradient_matches;
using mpiddp::testing::test_values;

TEST(MseLoss, HandValues) {
  // out = [1, 2 | 3, 4] (2 outputs, 2 samples), t = [0, 2 | 1, 1]
  // diff = [1, 0, 2, 3]; loss = (1 + 0 + 4 + 9) / 4 = 3.5; grad = 2 diff / 4 = [0.5, 0, 1, 1.5]
  MseLoss<double> mse;
  std::vector<double> out = {1, 2, 3, 4}, t = {0, 2, 1, 1}, g(4);
  const double loss = mse.forward_backward(ConstMatrixView<double>(out.data(), 2, 2), {t.data(), nullptr},
                                           MatrixView<double>(g.data(), 2, 2));
  EXPECT_DOUBLE_EQ(loss, 3.5);
  EXPECT_DOUBLE_EQ(g[0], 0.5);
  EXPECT_DOUBLE_EQ(g[1], 0.0);
  EXPECT_DOUBLE_EQ(g[2], 1.0);
  EXPECT_DOUBLE_EQ(g[3], 1.5);
  // Per-sample losses: (1+0)/2 = 0.5 and (4+9)/2 = 6.5; their mean is the batch loss.
  EvalSums sums;
  mse.accumulate(ConstMatrixView<double>(out.data(), 2, 2), {t.data(), nullptr}, sums);
  EXPECT_DOUBLE_EQ(sums.loss_sum, 7.0);
}

TEST(CrossEntropyLoss, HandValues) {
  // logits [0, 0, ln 2] label 2: p = [1/4, 1/4, 1/2], loss = -ln(1/2) = ln 2
  // logits [1, 0, 0] label 1:    loss = logsumexp - 0 = ln(e + 2)
  CrossEntropyLoss<double> ce;
  std::vector<double> out = {0, 0, std::log(2.0), 1, 0, 0}, g(6);
  std::vector<int32_t> labels = {2, 1};
  const double loss = ce.forward_backward(ConstMatrixView<double>(out.data(), 3, 2),
                                          {nullptr, labels.data()}, MatrixView<double>(g.data(), 3, 2));
  EXPECT_NEAR(loss, (std::log(2.0) + std::log(std::exp(1.0) + 2.0)) / 2, 1e-15);
  // grad of sample 0 = (p - onehot) / 2 = [1/8, 1/8, -1/4]
  EXPECT_NEAR(g[0], 0.125, 1e-15);
  EXPECT_NEAR(g[1], 0.125, 1e-15);
  EXPECT_NEAR(g[2], -0.25, 1e-15);
  EvalSums sums;
  ce.accumulate(ConstMatrixView<double>(out.data(), 3, 2), {nullptr, labels.data()}, sums);
  EXPECT_NEAR(sums.loss_sum, 2 * loss, 1e-14);
  EXPECT_EQ(sums.correct, 1.0);  // sample 0 predicts 2 (right), sample 1 predicts 0 (wrong)
}

TEST(CrossEntropyLoss, StableForLargeLogits) {
  CrossEntropyLoss<float> ce;
  std::vector<float> out = {1000.f, 0.f}, g(2);
  std::vector<int32_t> labels = {1};
  const double loss = ce.forward_backward(ConstMatrixView<float>(out.data(), 2, 1),
                                          {nullptr, labels.data()}, MatrixView<float>(g.data(), 2, 1));
  EXPECT_NEAR(loss, 1000.0, 1e-3);
  EXPECT_NEAR(g[0], 1.0f, 1e-6);
  EXPECT_NEAR(g[1], -1.0f, 1e-6);
}

template <typename LossType>
void check_loss_gradient(const BatchTargets<double>& targets, Index outputs, Index batch) {
  LossType loss;
  std::vector<double> out = test_values(outputs * batch, 5), g(out.size());
  loss.forward_backward(ConstMatrixView<double>(out.data(), outputs, batch), targets,
                        MatrixView<double>(g.data(), outputs, batch));
  std::vector<double> scratch(out.size());
  auto f = [&] {
    return loss.forward_backward(ConstMatrixView<double>(out.data(), outputs, batch), targets,
                                 MatrixView<double>(scratch.data(), outputs, batch));
  };
  expect_gradient_matches(f, out.data(), static_cast<long>(out.size()), g.data(), "dout");
}

TEST(MseLoss, GradientMatchesFiniteDifferences) {
  std::vector<double> t = test_values(12, 9);
  check_loss_gradient<MseLoss<double>>({t.data(), nullptr}, 3, 4);
}

TEST(CrossEntropyLoss, GradientMatchesFiniteDifferences) {
  std::vector<int32_t> labels = {0, 3, 1, 2, 3};
  check_loss_gradient<CrossEntropyLoss<double>>({nullptr, labels.data()}, 4, 5);
}

// A class per position: 2 samples of 2 positions with 3 classes each, so every sample's column
// holds 6 logits, position by position. The loss is the mean over the 4 predictions, which is
// the per-sample loss of the same logits read as 4 columns of 3.
TEST(CrossEntropyLoss, APerPositionLossIsTheMeanOverEveryPrediction) {
  CrossEntropyLoss<double> ce;
  std::vector<double> out = {0, 0, std::log(2.0), 1, 0, 0,   // sample 0: positions 0, 1
                             2, 0, 0, 0, 3, 0},              // sample 1: positions 0, 1
      g(12), g_columns(12);
  std::vector<int32_t> labels = {2, 1, 0, 0};  // (positions, samples)
  const double loss = ce.forward_backward(ConstMatrixView<double>(out.data(), 6, 2), {nullptr, labels.data(), 2},
                                          MatrixView<double>(g.data(), 6, 2));
  const double columns = ce.forward_backward(ConstMatrixView<double>(out.data(), 3, 4), {nullptr, labels.data()},
                                             MatrixView<double>(g_columns.data(), 3, 4));
  const double ln2 = std::log(2.0), e = std::exp(1.0);
  EXPECT_NEAR(loss, (ln2 + std::log(e + 2) + std::log(e * e + 2) - 2 + std::log(e * e * e + 2)) / 4, 1e-15);
  EXPECT_EQ(loss, columns);
  EXPECT_EQ(g, g_columns);
  EXPECT_NEAR(g[2], (0.5 - 1) / 4, 1e-15);  // (p - onehot) / 4 at position 0's label
  // Evaluation: per sample, the mean over its positions and the fraction predicted right.
  EvalSums sums;
  ce.accumulate(ConstMatrixView<double>(out.data(), 6, 2), {nullptr, labels.data(), 2}, sums);
  EXPECT_NEAR(sums.loss_sum, 2 * loss, 1e-14);
  // Sample 0: position 0 right (argmax 2), position 1 wrong; sample 1: right, wrong.
  EXPECT_EQ(sums.correct, 1.0);
}

TEST(CrossEntropyLoss, PerPositionGradientMatchesFiniteDifferences) {
  std::vector<int32_t> labels = {0, 3, 1, 2, 3, 0};  // 3 positions of 4 classes, 2 samples
  check_loss_gradient<CrossEntropyLoss<double>>({nullptr, labels.data(), 3}, 12, 2);
}

}  // namespace
}  // namespace mpiddp::nn
