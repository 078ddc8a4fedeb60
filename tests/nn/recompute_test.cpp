// A residual's "recompute" (nn/residual.hpp): its body's forward runs again in backward
// instead of its activations being kept. For nanoGPT's two blocks in float32, in a training
// pass with dropout on, the output, every parameter gradient and the input gradient are the
// same bits with and without it (a recomputing residual inside another as well), while the
// model keeps less; a body that cannot run its forward twice (batchnorm), recompute on
// another layer and a value that is not a boolean are config errors naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "../support/layer_harness.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/core/rng.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/nn/residual.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::LayerHarness;
using mpiddp::testing::specs;
using mpiddp::testing::test_values;

const Shape kBlockInput = {8, 16};  // T = 8 positions of C = 16, two heads of 8
constexpr Index kBlockValues = 8 * 16, kBlockBatch = 4;
const Index kBlockPositions[kBlockBatch] = {6, 1, 11, 3};  // the samples' places in their global batch

// nanoGPT's two blocks, pre-LayerNorm, with attention dropout and dropout; `recompute` is
// the JSON text of both residuals' key ("true" or "false").
std::string gpt_blocks_json(const std::string& recompute) {
  return R"([{"type": "residual", "recompute": )" + recompute + R"(, "layers": [
                {"type": "layernorm"}, {"type": "attention", "heads": 2, "dropout": 0.1}]},
             {"type": "residual", "recompute": )" + recompute + R"(, "layers": [
                {"type": "layernorm"}, {"type": "linear", "out": 64}, {"type": "gelu"},
                {"type": "linear", "out": 16}, {"type": "dropout", "p": 0.1}]}])";
}

// A residual whose body holds another residual (the MLP) between a layernorm and attention.
std::string nested_blocks_json(const std::string& outer, const std::string& inner) {
  return R"([{"type": "residual", "recompute": )" + outer + R"(, "layers": [
                {"type": "layernorm"},
                {"type": "residual", "recompute": )" + inner + R"(, "layers": [
                    {"type": "linear", "out": 64}, {"type": "gelu"}, {"type": "linear", "out": 16},
                    {"type": "dropout", "p": 0.1}]},
                {"type": "attention", "heads": 2, "dropout": 0.1}]},
             {"type": "layernorm"}])";
}

std::vector<float> as_floats(const std::vector<double>& values) { return {values.begin(), values.end()}; }

PassContext block_context(int64_t step = 17) {
  return testing::random_pass_context(42, 2, step, kBlockPositions);
}

struct BlockPass {
  std::vector<float> parameters, y, gradients, dx;
};

// One training pass of a stack of `layers` on test inputs, its parameters PyTorch's
// initialisation from one seed. The transient memory is clobbered between forward and
// backward, as the model's later layers overwrite it.
BlockPass block_training_pass(const std::string& layers, const PassContext& context = block_context()) {
  Sequential<float> stack(specs(layers.c_str()), kBlockInput);
  LayerHarness<float> h(stack, kBlockBatch);
  Rng rng(5);
  stack.initialize(rng);
  const std::vector<float> x = as_floats(test_values(kBlockValues * kBlockBatch, 1));
  const std::vector<float> dy = as_floats(test_values(kBlockValues * kBlockBatch, 2));
  BlockPass bits;
  bits.parameters = h.params;
  bits.y = h.forward(x, kBlockBatch, context);
  h.clobber_transient();
  bits.dx = h.backward(x, bits.y, dy, kBlockBatch, context);
  bits.gradients = h.grads;
  return bits;
}

void expect_bitwise_equal(const std::vector<float>& actual, const std::vector<float>& expected,
                          const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  ASSERT_FALSE(expected.empty()) << what;
  const auto differ = std::mismatch(actual.begin(), actual.end(), expected.begin(),
                                    [](float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; });
  EXPECT_TRUE(differ.first == actual.end())
      << what << ": first difference at " << differ.first - actual.begin() << ", " << *differ.first
      << " vs " << *differ.second;
}

void expect_same_block_pass(const BlockPass& actual, const BlockPass& expected, const std::string& what) {
  expect_bitwise_equal(actual.parameters, expected.parameters, what + ", parameters");
  expect_bitwise_equal(actual.y, expected.y, what + ", output");
  expect_bitwise_equal(actual.gradients, expected.gradients, what + ", parameter gradients");
  expect_bitwise_equal(actual.dx, expected.dx, what + ", input gradient");
}

TEST(Recompute, GptBlocksGiveTheSameBits) {
  const BlockPass kept = block_training_pass(gpt_blocks_json("false"));
  expect_same_block_pass(block_training_pass(gpt_blocks_json("true")), kept, "recomputed");
  // Not vacuous: the masks are in play, so a recomputation with another step's masks would
  // show (and NaNs from the clobbered memory would too).
  const BlockPass other_step = block_training_pass(gpt_blocks_json("false"), block_context(18));
  EXPECT_NE(other_step.gradients, kept.gradients);
  EXPECT_NE(other_step.dx, kept.dx);
}

TEST(Recompute, ARecomputingResidualInsideAnotherGivesTheSameBits) {
  const BlockPass kept = block_training_pass(nested_blocks_json("false", "false"));
  expect_same_block_pass(block_training_pass(nested_blocks_json("true", "true")), kept, "both recomputed");
  expect_same_block_pass(block_training_pass(nested_blocks_json("true", "false")), kept, "the outer recomputed");
  expect_same_block_pass(block_training_pass(nested_blocks_json("false", "true")), kept, "the inner recomputed");
}

// Bytes for kBlockBatch = 4 samples of (8, 16) float32, from the layers' scratch formulas (a
// value count v takes align64(4 v) bytes):
//   attention block body: layernorm out 128·4 = 512 values 2048, ping-pong 2 · 2048, layernorm
//     2 · align64(8·4·4) = 256, attention 2 · align64(3·16·32·4) + 2 · align64(16·32·4) +
//     align64(64·2·4·4) + W · 2 · align64(64·4) = 12288 + 4096 + 2048 + 512 W, W the workers
//     (one per core, at most one per head of the batch; 1 gives 18944): 24832 + 512 W;
//     the residual keeps body_out 2048 more: 26880 + 512 W (27392 on one core).
//   MLP block body: activations (128 + 512 + 512 + 128)·4·4 = 20480, ping-pong 2 · 512·4·4 =
//     16384, layernorm 256, dropout's mask 2048: 39168; with body_out 41216.
//   model: the first block's output 2048, ping-pong 2 · 2048, output and its gradient 2 · 2048.
// Kept: 2048 + 4096 + 26880 + 512 W + 41216 + 4096 = 78336 + 512 W. Recomputed: the blocks keep nothing, and
// the one transient region is the larger block's 41216: 2048 + 4096 + 41216 + 4096 = 51456.
TEST(Recompute, TheModelKeepsOnlyTheBlocksInputs) {
  Model<float> kept(kBlockInput, specs(gpt_blocks_json("false").c_str()), kBlockBatch);
  Model<float> recomputed(kBlockInput, specs(gpt_blocks_json("true").c_str()), kBlockBatch);
  const size_t workers = static_cast<size_t>(std::min<Index>(affinity_cores(), 2 * kBlockBatch));
  EXPECT_EQ(kept.layers().layer(0).scratch_bytes(kBlockBatch), 26880u + 512u * workers);
  EXPECT_EQ(kept.layers().layer(1).scratch_bytes(kBlockBatch), 41216u);
  EXPECT_EQ(kept.layers().transient_bytes(kBlockBatch), 0u);
  for (size_t r = 0; r < 2; ++r) {
    EXPECT_EQ(recomputed.layers().layer(r).scratch_bytes(kBlockBatch), 0u) << r;
    EXPECT_EQ(recomputed.layers().layer(r).transient_bytes(kBlockBatch),
              kept.layers().layer(r).scratch_bytes(kBlockBatch)) << r;
  }
  EXPECT_EQ(kept.activation_bytes(), 78336u + 512u * workers);
  EXPECT_EQ(recomputed.activation_bytes(), 51456u);
  // The same model for weight files and checkpoints.
  EXPECT_EQ(recomputed.describe(), kept.describe());

  // And the same bits through the model's own arenas, the layers after each block
  // overwriting its transient memory.
  kept.initialize(3);
  recomputed.initialize(3);
  const std::vector<float> x = as_floats(test_values(kBlockValues * kBlockBatch, 4));
  const std::vector<float> dy = as_floats(test_values(kBlockValues * kBlockBatch, 5));
  std::vector<float> outputs[2], gradients[2];
  Model<float>* models[2] = {&kept, &recomputed};
  for (int m = 0; m < 2; ++m) {
    const ConstMatrixView<float> x_view(x.data(), kBlockValues, kBlockBatch);
    const ConstMatrixView<float> y = models[m]->forward(block_context(), x_view);
    outputs[m].assign(y.data(), y.data() + y.size());
    std::copy(dy.begin(), dy.end(), models[m]->output_gradient().data());
    models[m]->zero_gradients();
    models[m]->backward(block_context(), x_view);
    gradients[m].assign(models[m]->gradients(), models[m]->gradients() + models[m]->parameter_count());
  }
  expect_bitwise_equal(outputs[1], outputs[0], "model output");
  expect_bitwise_equal(gradients[1], gradients[0], "model gradients");
}

// The ConfigError (exit 2) that make() throws.
template <typename Make>
ConfigError config_error_of(Make&& make, const char* layers) {
  try {
    make();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.code(), kExitConfig);
    return e;
  }
  ADD_FAILURE() << "expected a ConfigError for " << layers;
  return ConfigError("(none)", "no error");
}

// Of parsing these layers, and of building a model of them for an input (4).
ConfigError parsing_error_of(const char* layers) {
  return config_error_of([&] { specs(layers); }, layers);
}
ConfigError building_error_of(const char* layers) {
  return config_error_of([&] { Model<float>({4}, specs(layers), 2); }, layers);
}

bool error_mentions(const ConfigError& e, const std::string& text) {
  return std::string(e.what()).find(text) != std::string::npos;
}

TEST(Recompute, ABodyWithBatchNormIsRefusedNamingTheKeyAndTheLayer) {
  // A second training forward would move the running statistics again.
  const ConfigError direct = building_error_of(R"([{"type": "linear", "out": 4},
      {"type": "residual", "recompute": true, "layers": [{"type": "linear", "out": 4},
                                                         {"type": "batchnorm1d"}]}])");
  EXPECT_EQ(direct.key_path(), "model.layers[1].recompute");
  EXPECT_TRUE(error_mentions(direct, "model.layers[1].layers[1] (batchnorm1d)")) << direct.what();
  EXPECT_TRUE(error_mentions(direct, "running statistics")) << direct.what();
  // Deeper: the recomputing residual's body holds a residual that holds the batchnorm.
  const ConfigError nested = building_error_of(R"([{"type": "residual", "recompute": true, "layers": [
      {"type": "relu"}, {"type": "residual", "layers": [{"type": "batchnorm1d"}]}]}])");
  EXPECT_EQ(nested.key_path(), "model.layers[0].recompute");
  EXPECT_TRUE(error_mentions(nested, "model.layers[0].layers[1] (residual(batchnorm1d))")) << nested.what();
  // Without recompute, or with it on a residual beside the batchnorm, the models build.
  EXPECT_NO_THROW(Model<float>({4}, specs(R"([{"type": "residual", "recompute": false, "layers": [
      {"type": "batchnorm1d"}]}, {"type": "residual", "recompute": true, "layers": [{"type": "relu"}]}])"), 2));
}

TEST(Recompute, OnAnotherLayerTheErrorSaysItIsAResidualsKey) {
  const ConfigError linear = parsing_error_of(R"([{"type": "linear", "out": 4, "recompute": true}])");
  EXPECT_EQ(linear.key_path(), "model.layers[0].recompute");
  EXPECT_TRUE(error_mentions(linear, "unknown key of a linear layer: recompute belongs to a residual"))
      << linear.what();
  const ConfigError inside =
      parsing_error_of(R"([{"type": "residual", "layers": [{"type": "gelu", "recompute": true}]}])");
  EXPECT_EQ(inside.key_path(), "model.layers[0].layers[0].recompute");
  EXPECT_TRUE(error_mentions(inside, "recompute belongs to a residual")) << inside.what();
  // Other unknown keys keep the general message.
  const ConfigError other = parsing_error_of(R"([{"type": "linear", "out": 4, "recompte": true}])");
  EXPECT_EQ(other.key_path(), "model.layers[0].recompte");
  EXPECT_TRUE(error_mentions(other, "unknown key; known keys here")) << other.what();
  // And a residual's must be a boolean.
  const ConfigError number =
      parsing_error_of(R"([{"type": "residual", "recompute": 1, "layers": [{"type": "relu"}]}])");
  EXPECT_EQ(number.key_path(), "model.layers[0].recompute");
}

TEST(Recompute, ResolvedOnlyWhenGivenAndLeftOutOfWhatAResumeCompares) {
  io::Json model = {{"layers", io::Json::parse(R"([
      {"type": "residual", "layers": [{"type": "relu"}]},
      {"type": "residual", "recompute": true, "layers": [
          {"type": "residual", "recompute": false, "layers": [{"type": "relu"}]}]}])")}};
  io::JsonSection section(&model, "model");
  parse_layer_list(section, "layers");
  const io::Json resolved = section.resolved().at("layers");
  // A config without the key resolves, and hashes, as it did before the key existed.
  EXPECT_FALSE(resolved[0].contains("recompute"));
  EXPECT_EQ(resolved[1].at("recompute"), true);
  EXPECT_EQ(resolved[1].at("layers")[0].at("recompute"), false);
  const io::Json compared = without_recompute(resolved);
  EXPECT_EQ(compared.dump().find("recompute"), std::string::npos) << compared.dump();
  EXPECT_EQ(compared[1].at("layers")[0].at("layers")[0].at("type"), "relu");
}

}  // namespace
}  // namespace mpiddp::nn
