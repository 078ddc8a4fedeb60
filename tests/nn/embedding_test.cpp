// The embedding layer and the token-id path through a model: rows picked by id, gradients
// added row by row (repeated ids too), the whole model's gradients of a per-position
// cross-entropy against central differences in float64, and the config errors that keep
// token ids to the first layer.
#include "mpiddp/nn/embedding.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"
#include "../support/gradient_check.hpp"
#include "../support/layer_harness.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::specs;

// A bigram model: the embedding's row for token v is the logits of the token after v.
TEST(Embedding, ShapesNamesAndDescription) {
  Model<double> model({3}, specs(R"([{"type": "embedding", "vocab": 5, "dim": 4}])"), 2);
  EXPECT_EQ(model.input_kind(), InputKind::kTokenIds);
  EXPECT_EQ(model.token_vocabulary(), 5);
  EXPECT_EQ(model.output_shape(), (Shape{3, 4}));  // (T, dim): features in the last dimension
  ASSERT_EQ(model.tensors().size(), 1u);
  EXPECT_EQ(model.tensors()[0].name, "0.weight");
  EXPECT_EQ(model.tensors()[0].shape, (std::vector<Index>{5, 4}));  // nn.Embedding's [vocab, dim]
  EXPECT_EQ(model.describe(), "3-embedding5x4");
  Model<double> values({3}, specs(R"([{"type": "linear", "out": 2}])"), 2);
  EXPECT_EQ(values.input_kind(), InputKind::kValues);
  EXPECT_EQ(values.token_vocabulary(), 0);
}

TEST(Embedding, ForwardPicksTheRowOfEachId) {
  Model<double> model({2}, specs(R"([{"type": "embedding", "vocab": 4, "dim": 3}])"), 2);
  for (Index i = 0; i < 12; ++i) model.parameters()[i] = static_cast<double>(i);  // row v: 3v, 3v+1, 3v+2
  const std::vector<int32_t> ids = {2, 0, 3, 3};  // sample 0: (2, 0); sample 1: (3, 3)
  const auto y = model.forward(PassContext{}, BatchInput<double>::of_token_ids(ids.data(), 2, 2));
  const std::vector<double> expected = {6, 7, 8, 0, 1, 2, 9, 10, 11, 9, 10, 11};
  ASSERT_EQ(y.size(), 12);
  for (Index i = 0; i < 12; ++i) EXPECT_EQ(y.data()[i], expected[static_cast<size_t>(i)]) << i;
}

TEST(Embedding, BackwardAddsEachPositionsGradientToItsRow) {
  Model<double> model({2}, specs(R"([{"type": "embedding", "vocab": 4, "dim": 2}])"), 2);
  const std::vector<int32_t> ids = {1, 3, 1, 0};
  const BatchInput<double> input = BatchInput<double>::of_token_ids(ids.data(), 2, 2);
  model.forward(PassContext{}, input);
  MatrixView<double> dy = model.output_gradient();
  for (Index i = 0; i < dy.size(); ++i) dy.data()[i] = static_cast<double>(i + 1);  // 1..8
  model.zero_gradients();
  model.backward(PassContext{}, input);
  // Row 1 gets positions 0 and 2: (1, 2) + (5, 6); row 3 position 1; row 0 position 3; row 2 none.
  const std::vector<double> expected = {7, 8, 6, 8, 0, 0, 3, 4};
  for (Index i = 0; i < 8; ++i) EXPECT_EQ(model.gradients()[i], expected[static_cast<size_t>(i)]) << i;
}

// embedding -> tanh -> linear: logits per position, a class per position, in float64.
TEST(Embedding, ModelGradientsOfAPerPositionLossMatchCentralDifferences) {
  const Index positions = 3, batch = 2;
  Model<double> model({positions}, specs(R"([{"type": "embedding", "vocab": 5, "dim": 4},
                                              {"type": "tanh"}])"), batch);
  model.initialize(7);
  const std::vector<int32_t> ids = {4, 1, 1, 0, 2, 4};
  const BatchInput<double> input = BatchInput<double>::of_token_ids(ids.data(), positions, batch);
  // The tanh outputs (T, 4) per sample are read as 4 "classes" at each of T positions.
  const std::vector<int32_t> labels = {3, 0, 2, 1, 1, 3};
  const BatchTargets<double> targets{nullptr, labels.data(), positions};
  CrossEntropyLoss<double> loss;
  std::vector<double> scratch(static_cast<size_t>(model.outputs() * batch));
  auto value = [&] {
    return loss.forward_backward(model.forward(PassContext{}, input), targets,
                                 MatrixView<double>(scratch.data(), model.outputs(), batch));
  };
  model.zero_gradients();
  const auto out = model.forward(PassContext{}, input);
  loss.forward_backward(out, targets, model.output_gradient());
  model.backward(PassContext{}, input);
  const std::vector<double> analytic(model.gradients(), model.gradients() + model.parameter_count());
  mpiddp::testing::expect_gradient_matches(value, model.parameters(), model.parameter_count(), analytic.data(),
                                           "dweight");
  // Row 3 never appears: its gradient is exactly zero; the others are not.
  for (Index d = 0; d < 4; ++d) EXPECT_EQ(analytic[static_cast<size_t>(3 * 4 + d)], 0.0);
  EXPECT_GT(std::fabs(analytic[0]) + std::fabs(analytic[4]), 1e-3);
}

TEST(Embedding, InitialisesFromTheStandardNormal) {
  Model<double> model({1}, specs(R"([{"type": "embedding", "vocab": 100, "dim": 50}])"), 1);
  model.initialize(3);
  double sum = 0.0, squares = 0.0;
  const Index n = model.parameter_count();
  for (Index i = 0; i < n; ++i) {
    sum += model.parameters()[i];
    squares += model.parameters()[i] * model.parameters()[i];
  }
  EXPECT_NEAR(sum / n, 0.0, 0.05);         // 5000 draws: the mean's standard error is 0.014
  EXPECT_NEAR(squares / n, 1.0, 0.06);     // and the variance's about 0.02
}

std::string model_build_error(const char* layers, const Shape& input = {4}) {
  try {
    Model<float> model(input, specs(layers), 2);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Embedding, ConfigErrorsNameTheKey) {
  EXPECT_NE(model_build_error(R"([{"type": "linear", "out": 4}, {"type": "embedding", "vocab": 5, "dim": 4}])")
                .find("model.layers[1]: embedding takes token ids, so it must be the model's first layer"),
            std::string::npos);
  EXPECT_NE(model_build_error(R"([{"type": "residual", "layers": [{"type": "embedding", "vocab": 5, "dim": 1}]}])")
                .find("model.layers[0]: the residual's body starts with a layer that takes token ids"),
            std::string::npos);
  EXPECT_NE(model_build_error(R"([{"type": "embedding", "vocab": 5, "dim": 4}])", {1, 2, 2})
                .find("model.layers[0]: embedding takes a sequence of token ids, shape (T), but gets"),
            std::string::npos);
  EXPECT_NE(model_build_error(R"([{"type": "embedding", "dim": 4}])").find("model.layers[0].vocab: required key is missing"),
            std::string::npos);
  EXPECT_NE(model_build_error(R"([{"type": "embedding", "vocab": 5, "dim": 0}])").find("model.layers[0].dim"),
            std::string::npos);
}

}  // namespace
}  // namespace mpiddp::nn
