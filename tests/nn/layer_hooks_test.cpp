// The layer hooks (nn/layer_hooks.hpp), with a hook that records every call: the order of
// before_forward, before_backward and after_backward over a model with a residual inside a
// residual, with recompute on and off (recomputing calls the body's before_forward hooks
// again inside its backward); each unit's key and its parameter range in the model's buffer,
// checked against the model's own tensors; a pass gives the same bits with hooks as without.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "../support/layer_harness.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::specs;
using mpiddp::testing::test_values;

class RecordingHooks final : public LayerHooks {
 public:
  void before_forward(const LayerUnit& unit) override { record("F", unit); }
  void before_backward(const LayerUnit& unit) override { record("B", unit); }
  void after_backward(const LayerUnit& unit) override { record("A", unit); }
  std::vector<std::string> calls;
  std::map<std::string, LayerUnit> units;

 private:
  void record(const char* what, const LayerUnit& unit) {
    calls.push_back(std::string(what) + " " + unit.key);
    units[unit.key] = unit;
  }
};

// linear (0), a residual (1) holding layernorm, another residual (1.body.1: linear, gelu,
// linear) and a linear; then tanh (2, no parameters) and linear (3).
std::string model_json(const char* outer_recompute, const char* inner_recompute) {
  return std::string(R"([{"type": "linear", "out": 6},
      {"type": "residual", "recompute": )") + outer_recompute + R"(, "layers": [
          {"type": "layernorm"},
          {"type": "residual", "recompute": )" + inner_recompute + R"(, "layers": [
              {"type": "linear", "out": 12}, {"type": "gelu"}, {"type": "linear", "out": 6}]},
          {"type": "linear", "out": 6}]},
      {"type": "tanh"},
      {"type": "linear", "out": 2}])";
}

struct Recorded {
  std::vector<std::string> calls;
  std::map<std::string, LayerUnit> units;
  std::vector<double> gradients;
  std::vector<size_t> bounds;
  std::vector<std::string> tensor_names;
};

Recorded training_pass(const std::string& layers, bool hooked) {
  Model<double> model({4}, specs(layers.c_str()), 3);
  model.initialize(9);
  RecordingHooks hooks;
  if (hooked) model.install_hooks(&hooks);
  const std::vector<double> x = test_values(4 * 3, 1);
  const std::vector<double> dy = test_values(2 * 3, 2);
  const PassContext context = testing::random_pass_context();
  const ConstMatrixView<double> input(x.data(), 4, 3);
  model.zero_gradients();
  model.forward(context, input);
  std::copy(dy.begin(), dy.end(), model.output_gradient().data());
  model.backward(context, input);
  Recorded out{hooks.calls, hooks.units, {}, model.tensor_bounds(), {}};
  out.gradients.assign(model.gradients(), model.gradients() + model.parameter_count());
  for (const auto& tensor : model.tensors()) out.tensor_names.push_back(tensor.name);
  return out;
}

const std::vector<std::string> kForward = {"F 0", "F 1", "F 1.body.0", "F 1.body.1", "F 1.body.1.body.0",
                                           "F 1.body.1.body.1", "F 1.body.1.body.2", "F 1.body.2", "F 2", "F 3"};

TEST(LayerHooks, OrderWithoutRecompute) {
  std::vector<std::string> expected = kForward;
  for (const char* call : {"B 3", "A 3", "B 2", "A 2", "B 1", "B 1.body.2", "A 1.body.2", "B 1.body.1",
                           "B 1.body.1.body.2", "A 1.body.1.body.2", "B 1.body.1.body.1", "A 1.body.1.body.1",
                           "B 1.body.1.body.0", "A 1.body.1.body.0", "A 1.body.1", "B 1.body.0", "A 1.body.0", "A 1",
                           "B 0", "A 0"})
    expected.push_back(call);
  EXPECT_EQ(training_pass(model_json("false", "false"), true).calls, expected);
}

// Recomputing the outer residual runs its body's forward again (the inner residual's whole,
// since the inner one keeps its own activations); recomputing the inner one as well runs the
// inner body's forward once more inside the inner residual's backward.
TEST(LayerHooks, OrderWithRecompute) {
  std::vector<std::string> expected = kForward;
  for (const char* call : {"B 3", "A 3", "B 2", "A 2", "B 1",
                           "F 1.body.0", "F 1.body.1", "F 1.body.1.body.0", "F 1.body.1.body.1", "F 1.body.1.body.2",
                           "F 1.body.2",
                           "B 1.body.2", "A 1.body.2", "B 1.body.1",
                           "F 1.body.1.body.0", "F 1.body.1.body.1", "F 1.body.1.body.2",
                           "B 1.body.1.body.2", "A 1.body.1.body.2", "B 1.body.1.body.1", "A 1.body.1.body.1",
                           "B 1.body.1.body.0", "A 1.body.1.body.0", "A 1.body.1", "B 1.body.0", "A 1.body.0", "A 1",
                           "B 0", "A 0"})
    expected.push_back(call);
  EXPECT_EQ(training_pass(model_json("true", "true"), true).calls, expected);
}

// Each unit's range is its tensors' in the model's buffer: linear 0 holds "0.weight" and
// "0.bias"; the residual 1 everything from "1.body.0.weight" to "1.body.2.bias"; tanh none.
TEST(LayerHooks, UnitsNameTheirKeysTypesAndParameters) {
  const Recorded r = training_pass(model_json("false", "true"), true);
  const auto bound = [&](const std::string& name) {
    for (size_t t = 0; t < r.tensor_names.size(); ++t)
      if (r.tensor_names[t] == name) return static_cast<Index>(r.bounds[t]);
    ADD_FAILURE() << "no tensor " << name;
    return Index(-1);
  };
  const auto end_of = [&](const std::string& name) {
    for (size_t t = 0; t < r.tensor_names.size(); ++t)
      if (r.tensor_names[t] == name) return static_cast<Index>(r.bounds[t + 1]);
    ADD_FAILURE() << "no tensor " << name;
    return Index(-1);
  };
  const LayerUnit& first = r.units.at("0");
  EXPECT_EQ(first.type, "linear");
  EXPECT_EQ(first.depth, 0);
  EXPECT_EQ(first.first, 0);
  EXPECT_EQ(first.end, end_of("0.bias"));
  EXPECT_EQ(first.end, 4 * 6 + 6);
  const LayerUnit& block = r.units.at("1");
  EXPECT_EQ(block.type, "residual");
  EXPECT_EQ(block.first, bound("1.body.0.weight"));
  EXPECT_EQ(block.end, end_of("1.body.2.bias"));
  const LayerUnit& inner = r.units.at("1.body.1.body.2");
  EXPECT_EQ(inner.type, "linear");
  EXPECT_EQ(inner.depth, 2);
  EXPECT_EQ(inner.first, bound("1.body.1.body.2.weight"));
  EXPECT_EQ(inner.end, end_of("1.body.1.body.2.bias"));
  const LayerUnit& tanh = r.units.at("2");
  EXPECT_EQ(tanh.first, tanh.end);
  EXPECT_EQ(r.units.at("3").end, static_cast<Index>(r.bounds.back()));
}

TEST(LayerHooks, HooksChangeNoBit) {
  const Recorded with = training_pass(model_json("true", "false"), true);
  const Recorded without = training_pass(model_json("true", "false"), false);
  EXPECT_TRUE(without.calls.empty());
  ASSERT_EQ(with.gradients.size(), without.gradients.size());
  EXPECT_EQ(std::memcmp(with.gradients.data(), without.gradients.data(), with.gradients.size() * sizeof(double)), 0);
}

}  // namespace
}  // namespace mpiddp::nn
