// linear's "bias" and "tied_to", and init_std on the layers with weights.
//
// A GPT's head tied to its token embedding: one tensor under two names, the head's logits
// x W^T with W the embedding table, the table's gradient from both uses against central
// differences in float64 and against an untied copy's two gradients summed, and the same
// gradients from a pass that overwrites them as from one that adds onto zeros (a tied
// tensor has two writers; neither may overwrite). bias false, the ties that are config
// errors, and init_std's draws: N(0, init_std^2) weights, zero biases, norms left at ones and
// zeros, and without the key the draws of PyTorch's defaults as before.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/rng.hpp"
#include "mpiddp/nn/loss.hpp"
#include "mpiddp/nn/model.hpp"
#include "../support/gradient_check.hpp"
#include "../support/layer_harness.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::check_layer_gradients;
using mpiddp::testing::check_model_gradients;
using mpiddp::testing::expect_gradient_matches;
using mpiddp::testing::LayerHarness;
using mpiddp::testing::specs;
using mpiddp::testing::test_values;

// Token ids (T = 3) -> embedding [5, 4] -> + position -> layernorm -> logits over the 5 tokens,
// the head's weight the embedding table ("3.weight" is "0.weight").
constexpr const char* kTiedGpt = R"([{"type": "embedding", "vocab": 5, "dim": 4},
                                     {"type": "position_embedding", "positions": 3},
                                     {"type": "layernorm"},
                                     {"type": "linear", "out": 5, "bias": false, "tied_to": "0.weight"}])";
// The same with a head of its own.
constexpr const char* kUntiedGpt = R"([{"type": "embedding", "vocab": 5, "dim": 4},
                                       {"type": "position_embedding", "positions": 3},
                                       {"type": "layernorm"},
                                       {"type": "linear", "out": 5, "bias": false}])";
constexpr Index kPositions = 3, kBatch = 2;
// Two samples of 3 ids, 1 and 4 repeated (within a sample and across the batch); 2 and 3
// never read, so their rows' gradients come from the head alone.
const std::vector<int32_t> kIds = {4, 1, 1, 0, 1, 4};
const std::vector<int32_t> kLabels = {3, 0, 2, 1, 1, 3};  // the next token at each position

BatchInput<double> gpt_input() { return BatchInput<double>::of_token_ids(kIds.data(), kPositions, kBatch); }

// The per-position cross-entropy of the GPT on kIds and kLabels, its gradient into the model's
// output gradient and, with backward, into the parameters' (after zero_gradients, or, with
// context.overwrite_gradients, after prepare_gradient_overwrite).
double gpt_loss(Model<double>& model, const PassContext& context = {}, bool backward = true) {
  const BatchTargets<double> targets{nullptr, kLabels.data(), kPositions};
  CrossEntropyLoss<double> loss;
  const BatchInput<double> input = gpt_input();
  if (!backward) {
    std::vector<double> unused(static_cast<size_t>(model.outputs() * kBatch));
    return loss.forward_backward(model.forward(context, input), targets,
                                 MatrixView<double>(unused.data(), model.outputs(), kBatch));
  }
  if (context.overwrite_gradients) model.prepare_gradient_overwrite();
  else model.zero_gradients();
  const auto out = model.forward(context, input);
  const double value = loss.forward_backward(out, targets, model.output_gradient());
  model.backward(context, input);
  return value;
}

std::vector<double> gradients_of(const Model<double>& model) {
  return {model.gradients(), model.gradients() + model.parameter_count()};
}

TEST(TiedLinear, TheHeadOwnsNoTensorAndNamesTheTableAtItsOffset) {
  Model<double> model({kPositions}, specs(kTiedGpt), kBatch);
  // 0.weight [5, 4] at 0, 1.weight [3, 4] at 20, 2.weight and 2.bias [4] at 32 and 36: 40 in
  // all, and no 3.weight among them.
  ASSERT_EQ(model.tensors().size(), 4u);
  const std::vector<std::pair<std::string, Index>> expected = {{"0.weight", 0}, {"1.weight", 20}, {"2.weight", 32},
                                                               {"2.bias", 36}};
  for (size_t t = 0; t < expected.size(); ++t) {
    EXPECT_EQ(model.tensors()[t].name, expected[t].first);
    EXPECT_EQ(model.tensors()[t].offset, expected[t].second);
  }
  EXPECT_EQ(model.parameter_count(), 40);
  EXPECT_EQ(model.tensor_bounds(), (std::vector<size_t>{0, 20, 32, 36, 40}));
  ASSERT_EQ(model.tied_tensors().size(), 1u);
  EXPECT_EQ(model.tied_tensors()[0].name, "3.weight");
  EXPECT_EQ(model.tied_tensors()[0].offset, 0);
  EXPECT_EQ(model.tied_tensors()[0].shape, (std::vector<Index>{5, 4}));
  // Another architecture than the untied head's, in hashes and checkpoints.
  Model<double> untied({kPositions}, specs(kUntiedGpt), kBatch);
  EXPECT_EQ(untied.parameter_count(), 60);
  EXPECT_TRUE(untied.tied_tensors().empty());
  EXPECT_NE(model.describe(), untied.describe());
  EXPECT_NE(model.describe().find("linear5nobiastied0.weight"), std::string::npos) << model.describe();
}

TEST(TiedLinear, LogitsAreTheNormedInputTimesTheTableTransposed) {
  Model<double> model({kPositions}, specs(kTiedGpt), kBatch);
  double* p = model.parameters();
  // Table row v = (v, 0.5, -1, 2); positions anything; layernorm's scale 0 and shift
  // h = (1, 2, 0, -1), so every position's normed input is h and its logits W h:
  // logit v = v * 1 + 0.5 * 2 + (-1) * 0 + 2 * (-1) = v - 1.
  for (Index v = 0; v < 5; ++v) {
    const double row[4] = {static_cast<double>(v), 0.5, -1, 2};
    std::copy(row, row + 4, p + 4 * v);
  }
  for (Index i = 20; i < 32; ++i) p[i] = 10.0 * static_cast<double>(i);
  const double shift[8] = {0, 0, 0, 0, 1, 2, 0, -1};
  std::copy(shift, shift + 8, p + 32);
  const auto y = model.forward(PassContext{}, gpt_input());
  ASSERT_EQ(y.rows(), kPositions * 5);
  for (Index b = 0; b < kBatch; ++b)
    for (Index t = 0; t < kPositions; ++t)
      for (Index v = 0; v < 5; ++v) EXPECT_EQ(y(t * 5 + v, b), static_cast<double>(v - 1)) << b << ", " << t << ", " << v;
  // The head reads the table itself: row 2 = (0, 0, 0, 1) gives logit 2 = h_3 = -1.
  const double row2[4] = {0, 0, 0, 1};
  std::copy(row2, row2 + 4, p + 8);
  const auto again = model.forward(PassContext{}, gpt_input());
  EXPECT_EQ(again(2, 0), -1.0);
  EXPECT_EQ(again(5 + 2, 1), -1.0);
}

TEST(TiedLinear, ForwardIsTheUntiedHeadsWithTheTableCopied) {
  Model<double> tied({kPositions}, specs(kTiedGpt), kBatch), untied({kPositions}, specs(kUntiedGpt), kBatch);
  tied.initialize(5);
  std::copy(tied.parameters(), tied.parameters() + 40, untied.parameters());
  std::copy(tied.parameters(), tied.parameters() + 20, untied.parameters() + 40);  // 3.weight = 0.weight
  const auto a = tied.forward(PassContext{}, gpt_input());
  const std::vector<double> tied_out(a.data(), a.data() + a.size());
  const auto b = untied.forward(PassContext{}, gpt_input());
  ASSERT_EQ(b.size(), static_cast<Index>(tied_out.size()));
  for (size_t i = 0; i < tied_out.size(); ++i) EXPECT_EQ(tied_out[i], b.data()[i]) << i;
}

TEST(TiedLinear, TheTablesGradientSumsBothUsesAndMatchesCentralDifferences) {
  Model<double> model({kPositions}, specs(kTiedGpt), kBatch);
  model.initialize(7);
  gpt_loss(model);
  const std::vector<double> analytic = gradients_of(model);
  auto value = [&] { return gpt_loss(model, PassContext{}, false); };
  expect_gradient_matches(value, model.parameters(), model.parameter_count(), analytic.data(), "dparams");

  // The untied copy's embedding gradient plus its head's is the tied table's.
  Model<double> untied({kPositions}, specs(kUntiedGpt), kBatch);
  std::copy(model.parameters(), model.parameters() + 40, untied.parameters());
  std::copy(model.parameters(), model.parameters() + 20, untied.parameters() + 40);
  gpt_loss(untied);
  const std::vector<double> parts = gradients_of(untied);
  for (Index i = 0; i < 20; ++i) EXPECT_NEAR(analytic[i], parts[i] + parts[40 + i], 1e-15) << i;
  for (Index i = 20; i < 40; ++i) EXPECT_EQ(analytic[i], parts[i]) << i;
  // Rows 2 and 3 are never read: their gradient is the head's alone, and not zero.
  for (Index i = 8; i < 16; ++i) {
    EXPECT_EQ(parts[i], 0.0) << i;
    EXPECT_EQ(analytic[i], parts[40 + i]) << i;
    EXPECT_GT(std::fabs(analytic[i]), 1e-4) << i;
  }
}

// A pass with overwrite_gradients over a buffer of stale sums (prepared by
// prepare_gradient_overwrite) must give the bits of one that adds onto zeros: neither writer
// of a tied tensor may overwrite what the other wrote.
void expect_overwriting_pass_is_the_adding_one(Model<double>& model, const std::function<void(const PassContext&)>& pass) {
  pass(PassContext{});
  const std::vector<double> added = gradients_of(model);
  std::fill_n(model.gradients(), model.parameter_count(), 7.0);  // the last step's sums
  PassContext overwrite;
  overwrite.overwrite_gradients = true;
  pass(overwrite);
  const std::vector<double> written = gradients_of(model);
  for (size_t i = 0; i < added.size(); ++i) EXPECT_EQ(written[i], added[i]) << model.describe() << ", gradient " << i;
}

TEST(TiedLinear, AnOverwritingPassGivesTheAddingPasssGradients) {
  Model<double> gpt({kPositions}, specs(kTiedGpt), kBatch);
  gpt.initialize(7);
  expect_overwriting_pass_is_the_adding_one(gpt, [&](const PassContext& context) { gpt_loss(gpt, context); });
}

// A linear that can overwrite its gradients owns the tied tensor here: the head adds its
// part first (backward runs last to first), and the owner must add its own after it. Also
// with the owner a layer of a residual's body, and with the tied layer one.
constexpr const char* kTiedToALinear = R"([{"type": "linear", "out": 4}, {"type": "tanh"},
                                           {"type": "linear", "out": 4, "tied_to": "0.weight"}])";
constexpr const char* kTiedIntoAResidual = R"([{"type": "residual", "layers": [{"type": "linear", "out": 4}]},
                                               {"type": "tanh"},
                                               {"type": "linear", "out": 4, "tied_to": "0.body.0.weight"}])";
constexpr const char* kTiedFromAResidual = R"([{"type": "linear", "out": 4}, {"type": "tanh"},
                                               {"type": "residual", "layers": [{"type": "linear", "out": 4,
                                                                                "tied_to": "0.weight"}]}])";

// The mse pass of layer_harness.hpp's check_model_gradients, on a sequence (3, 4) of values.
void mse_pass(Model<double>& model, const PassContext& context) {
  const std::vector<double> x = test_values(12 * kBatch, 1), t = test_values(12 * kBatch, 2);
  const ConstMatrixView<double> xs(x.data(), 12, kBatch);
  if (context.overwrite_gradients) model.prepare_gradient_overwrite();
  else model.zero_gradients();
  MseLoss<double> mse;
  const auto out = model.forward(context, xs);
  mse.forward_backward(out, {t.data(), nullptr}, model.output_gradient());
  model.backward(context, xs);
}

TEST(TiedLinear, TiedToALinearAndAcrossResiduals) {
  for (const auto& [json, second_name] : {std::pair{kTiedToALinear, "2.weight"}, std::pair{kTiedIntoAResidual, "2.weight"},
                                          std::pair{kTiedFromAResidual, "2.body.0.weight"}}) {
    SCOPED_TRACE(json);
    Model<double> model({3, 4}, specs(json), kBatch);
    // 0.weight [4, 4] and 0.bias (or 0.body.0.*), then the tied layer's bias alone: 24.
    EXPECT_EQ(model.parameter_count(), 24);
    ASSERT_EQ(model.tied_tensors().size(), 1u);
    EXPECT_EQ(model.tied_tensors()[0].name, second_name);
    EXPECT_EQ(model.tied_tensors()[0].offset, 0);
    model.initialize(3);
    EXPECT_GT(check_model_gradients(model, kBatch), 1e-3);
    expect_overwriting_pass_is_the_adding_one(model, [&](const PassContext& context) { mse_pass(model, context); });
  }
  // Untied, the first linear overwrites its gradients: the stale sums are left for it to
  // write over. Tied, they are cleared, for it adds.
  Model<double> untied({3, 4}, specs(R"([{"type": "linear", "out": 4}, {"type": "tanh"}, {"type": "linear", "out": 4}])"), 2);
  Model<double> tied({3, 4}, specs(kTiedToALinear), 2);
  for (Model<double>* model : {&untied, &tied}) {
    std::fill_n(model->gradients(), model->parameter_count(), 7.0);
    model->prepare_gradient_overwrite();
  }
  EXPECT_EQ(untied.gradients()[0], 7.0);
  EXPECT_EQ(tied.gradients()[0], 0.0);
}

// ZeRO-2's staging (Model::bind_unit_gradients, Note [gradients staged by unit]): each of the
// model's own layers writes its gradients into memory of its own, a tensor tied to it into
// the owner's, and the model's buffer is given back. An overwriting pass into stale memory,
// with only what it adds to cleared (gradients_added_to), gives each layer the gradients the
// whole buffer gets, bit for bit: the GPT's table from its two uses, and each model of the
// ties across residuals.
void expect_unit_gradients_are_the_buffers(const char* json, const Shape& input,
                                           const std::function<void(Model<double>&, const PassContext&)>& pass) {
  SCOPED_TRACE(json);
  Model<double> whole(input, specs(json), kBatch), staged(input, specs(json), kBatch);
  whole.initialize(5);
  staged.initialize(5);
  pass(whole, PassContext{});
  const LayerUnits units = staged.units();
  std::vector<std::vector<double>> memory;
  std::vector<double*> layer_gradients;
  for (size_t l = 0; l + 1 < units.bounds.size(); ++l) {
    memory.emplace_back(static_cast<size_t>(units.bounds[l + 1] - units.bounds[l]), 7.0);  // stale
    layer_gradients.push_back(memory.back().empty() ? nullptr : memory.back().data());
  }
  staged.bind_unit_gradients(layer_gradients);
  EXPECT_EQ(staged.gradients(), nullptr);
  for (const auto& [first, end] : staged.gradients_added_to())
    for (size_t l = 0; l < memory.size(); ++l)
      for (Index i = std::max(first, units.bounds[l]); i < std::min(end, units.bounds[l + 1]); ++i)
        memory[l][static_cast<size_t>(i - units.bounds[l])] = 0.0;
  PassContext overwrite;
  overwrite.overwrite_gradients = true;
  pass(staged, overwrite);
  for (size_t l = 0; l < memory.size(); ++l)
    for (size_t i = 0; i < memory[l].size(); ++i)
      EXPECT_EQ(memory[l][i], whole.gradients()[static_cast<size_t>(units.bounds[l]) + i]) << "layer " << l << ", " << i;
}

TEST(TiedLinear, GradientsStagedByLayerAreTheBuffers) {
  // The GPT: the table (layer 0) tied to by the head (layer 3, without parameters of its own).
  const LayerUnits gpt = layer_units(Sequential<double>(specs(kTiedGpt), {kPositions}));
  EXPECT_EQ(gpt.bounds, (std::vector<Index>{0, 20, 32, 40, 40}));  // table 5·4, positions 3·4, norm 2·4
  EXPECT_EQ(gpt.tied, (std::vector<char>{1, 0, 0, 0}));
  auto gpt_pass = [](Model<double>& model, const PassContext& context) {
    const BatchTargets<double> targets{nullptr, kLabels.data(), kPositions};
    CrossEntropyLoss<double> loss;
    const auto out = model.forward(context, gpt_input());
    loss.forward_backward(out, targets, model.output_gradient());
    model.backward(context, gpt_input());
  };
  expect_unit_gradients_are_the_buffers(kTiedGpt, {kPositions}, gpt_pass);
  auto values_pass = [](Model<double>& model, const PassContext& context) {
    const std::vector<double> x = test_values(12 * kBatch, 1), t = test_values(12 * kBatch, 2);
    const ConstMatrixView<double> xs(x.data(), 12, kBatch);
    MseLoss<double> mse;
    const auto out = model.forward(context, xs);
    mse.forward_backward(out, {t.data(), nullptr}, model.output_gradient());
    model.backward(context, xs);
  };
  for (const char* json : {kTiedToALinear, kTiedIntoAResidual, kTiedFromAResidual})
    expect_unit_gradients_are_the_buffers(json, {3, 4}, values_pass);
  // The owner of the residual's tie is the residual as a whole: layer 0, [0, 20).
  const LayerUnits into = layer_units(Sequential<double>(specs(kTiedIntoAResidual), {3, 4}));
  EXPECT_EQ(into.bounds, (std::vector<Index>{0, 20, 20, 24}));
  EXPECT_EQ(into.tied, (std::vector<char>{1, 0, 0}));
}

TEST(LinearWithoutBias, HasNoBiasTensorAndComputesWx) {
  auto linear = mpiddp::testing::layer<double>(R"({"type": "linear", "out": 2, "bias": false})", {3});
  ASSERT_EQ(linear->parameters().size(), 1u);
  EXPECT_EQ(linear->parameters()[0].name, "weight");
  EXPECT_EQ(linear->parameter_count(), 6);
  EXPECT_EQ(linear->describe(), "linear2nobias");
  LayerHarness<double> h(*linear, 2);
  h.set_parameters({1, 2, 3, 4, 5, 6});  // W = [[1, 2, 3], [4, 5, 6]]
  // x = (1, 1, 2): (1 + 2 + 6, 4 + 5 + 12) = (9, 21); x = (1, 0, -1): (1 - 3, 4 - 6) = (-2, -2).
  EXPECT_EQ(h.forward({1, 1, 2, 1, 0, -1}, 2), (std::vector<double>{9, 21, -2, -2}));
  check_layer_gradients(*linear, 3);
  check_layer_gradients(*mpiddp::testing::layer<double>(R"({"type": "linear", "out": 3, "bias": false})", {4, 5}), 2);
  // In a model: only 0.weight; "bias": true is the default's layout.
  Model<double> model({3}, specs(R"([{"type": "linear", "out": 2, "bias": false}])"), 1);
  ASSERT_EQ(model.tensors().size(), 1u);
  EXPECT_EQ(model.tensors()[0].name, "0.weight");
  Model<double> with({3}, specs(R"([{"type": "linear", "out": 2, "bias": true}])"), 1),
      plain({3}, specs(R"([{"type": "linear", "out": 2}])"), 1);
  EXPECT_EQ(with.describe(), plain.describe());
  EXPECT_EQ(with.tensors()[1].name, "0.bias");
}

// The key path and message of the ConfigError building a model of these layers gives.
std::pair<std::string, std::string> build_error(const char* layers, const Shape& input = {kPositions}) {
  try {
    Model<float> model(input, specs(layers), 2);
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), kExitConfig);
    return {e.key_path(), e.what()};
  }
  return {"(no error)", ""};
}

std::string gpt_tied_to(const char* target) {
  return std::string(R"([{"type": "embedding", "vocab": 5, "dim": 4}, {"type": "position_embedding", "positions": 3},
                         {"type": "layernorm"}, {"type": "linear", "out": 5, "bias": false, "tied_to": )") +
         target + "}]";
}

TEST(TiedLinear, ConfigErrorsNameTheTieAndTheProblem) {
  auto [key, message] = build_error(gpt_tied_to(R"("9.weight")").c_str());
  EXPECT_EQ(key, "model.layers[3].tied_to");
  EXPECT_NE(message.find("'9.weight' names no tensor of the model; its tensors are 0.weight, 1.weight, 2.weight, 2.bias"),
            std::string::npos)
      << message;
  // The position table is [3, 4]; the head needs [5, 4].
  std::tie(key, message) = build_error(gpt_tied_to(R"("1.weight")").c_str());
  EXPECT_EQ(key, "model.layers[3].tied_to");
  EXPECT_NE(message.find("'1.weight' has shape [3, 4] but the layer needs [5, 4]"), std::string::npos) << message;
  std::tie(key, message) = build_error(gpt_tied_to(R"("2.bias")").c_str());
  EXPECT_NE(message.find("'2.bias' has shape [4] but the layer needs [5, 4]"), std::string::npos) << message;
  // Layer 0 tied to layer 2's weight, of the right shape [4, 4]: a later layer's.
  std::tie(key, message) = build_error(
      R"([{"type": "linear", "out": 4, "tied_to": "2.weight"}, {"type": "tanh"}, {"type": "linear", "out": 4}])", {4});
  EXPECT_EQ(key, "model.layers[0].tied_to");
  EXPECT_NE(message.find("'2.weight' is not an earlier layer's tensor"), std::string::npos) << message;
  // Inside a residual's body the key is the body's layer's.
  std::tie(key, message) = build_error(
      R"([{"type": "linear", "out": 4}, {"type": "residual", "layers": [{"type": "linear", "out": 4, "tied_to": "0.bias"}]}])",
      {4});
  EXPECT_EQ(key, "model.layers[1].layers[0].tied_to");
  EXPECT_NE(message.find("'0.bias' has shape [4] but the layer needs [4, 4]"), std::string::npos) << message;
  // Not a name at all.
  std::tie(key, message) = build_error(gpt_tied_to(R"("")").c_str());
  EXPECT_EQ(key, "model.layers[3].tied_to");
  EXPECT_NE(message.find("expected a tensor name of an earlier layer"), std::string::npos) << message;
  EXPECT_EQ(build_error(gpt_tied_to("0").c_str()).first, "model.layers[3].tied_to");
  EXPECT_EQ(build_error(R"([{"type": "linear", "out": 2, "bias": "no"}])", {3}).first, "model.layers[0].bias");
  EXPECT_EQ(build_error(gpt_tied_to(R"("0.weight")").c_str()).first, "(no error)");
}

// init_std ---------------------------------------------------------------------------------

struct Moments {
  double mean, std;
};

Moments moments(const double* values, Index count) {
  double sum = 0, squares = 0;
  for (Index i = 0; i < count; ++i) sum += values[i];
  const double mean = sum / static_cast<double>(count);
  for (Index i = 0; i < count; ++i) squares += (values[i] - mean) * (values[i] - mean);
  return {mean, std::sqrt(squares / static_cast<double>(count - 1))};
}

// Tensor `name` of the model: its values.
std::pair<const double*, Index> tensor(const Model<double>& model, const std::string& name) {
  for (const ParameterTensor& t : model.tensors())
    if (t.name == name) return {model.parameters() + t.offset, t.size()};
  ADD_FAILURE() << "no tensor " << name;
  return {nullptr, 0};
}

// n draws of N(0, 0.02^2): the sample std has relative standard deviation 1 / sqrt(2 n),
// 0.63 % for n = 12,800 (the smallest below), so 3 % is 4.8 of them; the mean's is
// 0.02 / sqrt(n) = 1.8e-4, and 1e-3 is 5.6 of them.
void expect_normal_002(const Model<double>& model, const std::string& name, Index at_least) {
  const auto [values, count] = tensor(model, name);
  ASSERT_GE(count, at_least) << name;
  const Moments m = moments(values, count);
  EXPECT_NEAR(m.mean, 0.0, 1e-3) << name;
  EXPECT_NEAR(m.std, 0.02, 0.03 * 0.02) << name;
}

void expect_zeros(const Model<double>& model, const std::string& name) {
  const auto [values, count] = tensor(model, name);
  ASSERT_GT(count, 0) << name;
  for (Index i = 0; i < count; ++i) ASSERT_EQ(values[i], 0.0) << name << "[" << i << "]";
}

TEST(InitStd, WeightsAreNormalWithThatStdAndBiasesZero) {
  Model<double> linear({200}, specs(R"([{"type": "linear", "out": 100, "init_std": 0.02}])"), 1);
  linear.initialize(3);
  expect_normal_002(linear, "0.weight", 20000);
  expect_zeros(linear, "0.bias");

  Model<double> attention({4, 128}, specs(R"([{"type": "attention", "heads": 2, "init_std": 0.02}])"), 1);
  attention.initialize(4);
  expect_normal_002(attention, "0.c_attn.weight", 49152);
  expect_normal_002(attention, "0.c_proj.weight", 16384);
  expect_zeros(attention, "0.c_attn.bias");
  expect_zeros(attention, "0.c_proj.bias");

  Model<double> conv({16, 8, 8}, specs(R"([{"type": "conv2d", "out": 32, "kernel": 5, "init_std": 0.02}])"), 1);
  conv.initialize(5);
  expect_normal_002(conv, "0.weight", 12800);
  expect_zeros(conv, "0.bias");

  Model<double> tables({64}, specs(R"([{"type": "embedding", "vocab": 200, "dim": 64, "init_std": 0.02},
                                       {"type": "position_embedding", "positions": 256, "init_std": 0.02}])"), 1);
  tables.initialize(6);
  expect_normal_002(tables, "0.weight", 12800);
  expect_normal_002(tables, "1.weight", 16384);
}

TEST(InitStd, NormsKeepOnesAndZeros) {
  Model<double> model({3, 4}, specs(R"([{"type": "layernorm", "init_std": 0.02}])"), 1);
  model.initialize(3);
  EXPECT_EQ(std::vector<double>(model.parameters(), model.parameters() + 8), (std::vector<double>{1, 1, 1, 1, 0, 0, 0, 0}));
}

// Without init_std every layer draws as before the key existed, PyTorch's defaults, in layer
// order from the model's init stream Rng(mix_seed(seed, 0x1417)): linear and conv2d weights
// then biases U(-1/sqrt(fan_in), 1/sqrt(fan_in)); attention all four tensors U(+-1/sqrt(C));
// embedding tables N(0, 1); layernorm no draws. A tied head draws its bias only.
struct Draw {
  bool normal;
  Index count;
  double bound;  // uniform's
};

template <typename T>
void expect_default_draws(const Shape& input, const char* json, const std::vector<Draw>& draws, uint64_t seed) {
  SCOPED_TRACE(json);
  Model<T> model(input, specs(json), 1);
  model.initialize(seed);
  Rng rng(mix_seed(seed, 0x1417));
  std::vector<T> expected;
  for (const Draw& d : draws)
    for (Index i = 0; i < d.count; ++i)
      expected.push_back(static_cast<T>(d.normal ? rng.normal() : rng.uniform(-d.bound, d.bound)));
  ASSERT_EQ(static_cast<Index>(expected.size()), model.parameter_count());
  EXPECT_EQ(std::memcmp(expected.data(), model.parameters(), expected.size() * sizeof(T)), 0);
}

template <typename T>
void expect_all_default_draws() {
  const double half = 0.5;  // 1 / sqrt(4)
  expect_default_draws<T>({4}, R"([{"type": "linear", "out": 3}, {"type": "tanh"}, {"type": "linear", "out": 2}])",
                          {{false, 15, half}, {false, 8, 1 / std::sqrt(3.0)}}, 11);
  // conv2d 2 -> 3 channels, 3x3: 54 weights and 3 biases U(+-1/sqrt(18)); linear 27 -> 2.
  expect_default_draws<T>({2, 5, 5},
                          R"([{"type": "conv2d", "out": 3, "kernel": 3}, {"type": "flatten"}, {"type": "linear", "out": 2}])",
                          {{false, 57, 1 / std::sqrt(18.0)}, {false, 56, 1 / std::sqrt(27.0)}}, 12);
  // embedding 20, positions 16, attention 48 + 12 + 16 + 4 = 80, linear 4 -> 5: 25.
  const char* gpt = R"([{"type": "embedding", "vocab": 5, "dim": 4}, {"type": "position_embedding", "positions": 4},
                        {"type": "attention", "heads": 2}, {"type": "linear", "out": 5}])";
  expect_default_draws<T>({4}, gpt, {{true, 20, 0}, {true, 16, 0}, {false, 80, half}, {false, 25, half}}, 13);
  // The tied head: its 5 biases only, after the 20 + 12 table values.
  const char* tied = R"([{"type": "embedding", "vocab": 5, "dim": 4}, {"type": "position_embedding", "positions": 3},
                         {"type": "linear", "out": 5, "tied_to": "0.weight"}])";
  expect_default_draws<T>({3}, tied, {{true, 20, 0}, {true, 12, 0}, {false, 5, half}}, 14);
}

TEST(InitStd, WithoutItTheDrawsArePyTorchsDefaultsAsBefore) {
  expect_all_default_draws<float>();
  expect_all_default_draws<double>();
  // And the layernorm between them draws nothing: the same values with it.
  Model<double> with({3}, specs(R"([{"type": "embedding", "vocab": 5, "dim": 4}, {"type": "layernorm"},
                                    {"type": "linear", "out": 2}])"), 1),
      without({3}, specs(R"([{"type": "embedding", "vocab": 5, "dim": 4}, {"type": "linear", "out": 2}])"), 1);
  with.initialize(9);
  without.initialize(9);
  EXPECT_EQ(std::memcmp(with.parameters() + 28, without.parameters() + 20, 10 * sizeof(double)), 0);
}

// ZeRO-3 (a Model built with a ParameterPart, Note [parameters gathered by unit]): the model
// keeps a part of its parameters alone, never all P; initialised a layer at a time in a
// placeholder, its part holds the whole model's values there, bit for bit. Bound to memory of
// each layer's own (Model::bind_unit_parameters), a tensor tied to a layer (the GPT's head)
// reading the owner's, and that memory holding what a gather brings (the whole model's
// values), a pass gives every gradient the whole model's, bit for bit; with the first layer's
// memory changed, the gradients change too.
void expect_unit_parameters_are_read(const char* json, const Shape& input,
                                     const std::function<void(Model<double>&, const PassContext&)>& pass) {
  SCOPED_TRACE(json);
  Model<double> whole(input, specs(json), kBatch);
  const Index count = whole.parameter_count(), begin = 3, end = count - 2;  // a part cut anywhere
  Model<double> parted(input, specs(json), kBatch, 0, ParameterPart{begin, end});
  EXPECT_EQ(parted.parameters(), nullptr);
  EXPECT_EQ(parted.parameter_part_begin(), begin);
  EXPECT_EQ(parted.parameter_part_end(), end);
  whole.initialize(5);
  parted.initialize(5);
  for (Index i = begin; i < end; ++i) ASSERT_EQ(parted.parameter_part()[i - begin], whole.parameters()[i]) << i;
  pass(whole, PassContext{});
  const LayerUnits units = parted.units();
  const size_t layers = units.bounds.size() - 1;
  std::vector<std::vector<double>> gradients(layers), parameters(layers);
  std::vector<double*> layer_gradients(layers, nullptr), layer_parameters(layers, nullptr);
  for (size_t l = 0; l < layers; ++l) {
    const auto first = static_cast<size_t>(units.bounds[l]), last = static_cast<size_t>(units.bounds[l + 1]);
    if (first == last) continue;
    gradients[l].assign(last - first, 0.0);
    parameters[l].assign(whole.parameters() + first, whole.parameters() + last);  // as gathered
    layer_gradients[l] = gradients[l].data();
    layer_parameters[l] = parameters[l].data();
  }
  parted.bind_unit_gradients(layer_gradients);
  parted.bind_unit_parameters(layer_parameters);
  PassContext overwrite;
  overwrite.overwrite_gradients = true;
  pass(parted, overwrite);
  for (size_t l = 0; l < layers; ++l)
    for (size_t i = 0; i < gradients[l].size(); ++i)
      EXPECT_EQ(gradients[l][i], whole.gradients()[static_cast<size_t>(units.bounds[l]) + i]) << "layer " << l << ", " << i;
  // The first layer's parameters halved where the layers read them: the gradients change.
  for (double& p : parameters[0]) p *= 0.5;
  for (auto& g : gradients) std::fill(g.begin(), g.end(), 0.0);
  pass(parted, overwrite);
  double moved = 0.0;
  for (size_t l = 0; l < layers; ++l)
    for (size_t i = 0; i < gradients[l].size(); ++i)
      moved = std::max(moved, std::abs(gradients[l][i] - whole.gradients()[static_cast<size_t>(units.bounds[l]) + i]));
  EXPECT_GT(moved, 1e-6);
}

TEST(TiedLinear, ParametersKeptInPartsAreReadFromTheirUnits) {
  expect_unit_parameters_are_read(kTiedGpt, {kPositions}, [](Model<double>& model, const PassContext& context) {
    const BatchTargets<double> targets{nullptr, kLabels.data(), kPositions};
    CrossEntropyLoss<double> loss;
    const auto out = model.forward(context, gpt_input());
    loss.forward_backward(out, targets, model.output_gradient());
    model.backward(context, gpt_input());
  });
  for (const char* json : {kTiedToALinear, kTiedIntoAResidual, kTiedFromAResidual})
    expect_unit_parameters_are_read(json, {3, 4}, [](Model<double>& model, const PassContext& context) {
      const std::vector<double> x = test_values(12 * kBatch, 1), t = test_values(12 * kBatch, 2);
      const ConstMatrixView<double> xs(x.data(), 12, kBatch);
      MseLoss<double> mse;
      const auto out = model.forward(context, xs);
      mse.forward_backward(out, {t.data(), nullptr}, model.output_gradient());
      model.backward(context, xs);
    });
}

}  // namespace
}  // namespace mpiddp::nn
