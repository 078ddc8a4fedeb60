// Layers against PyTorch: every case of tests/golden/conv_pool.json (conv2d and the pools)
// and tests/golden/sequence_layers.json (linear on a sequence, layernorm, position_embedding,
// gelu), which tools/golden/conv_pool.py and sequence_layers.py write (their docstrings
// describe the cases and the layout).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "../support/layer_harness.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::LayerHarness;

// float64 throughout, values of O(1) and sums of at most a few hundred terms: PyTorch and
// mpiddp add in different orders, which moves results by a few ulp, far below this bound.
constexpr double kTolerance = 1e-12;

// A file of golden cases and the layer types its cases must cover.
struct GoldenFile {
  std::string name;  // "conv_pool": tests/golden/conv_pool.json, from tools/golden/conv_pool.py
  std::set<std::string> types;
};

const std::vector<GoldenFile> kFiles = {
    {"conv_pool", {"conv2d", "maxpool2d", "avgpool2d", "global_avgpool", "flatten"}},
    {"sequence_layers", {"linear", "layernorm", "position_embedding", "gelu", "attention"}},
};

std::string path_of(const GoldenFile& file) {
  return std::string(MPIDDP_SOURCE_DIR) + "/tests/golden/" + file.name + ".json";
}

// A file's cases, or none when it cannot be read (GoldenFiles then fails, naming it).
io::Json cases_of(const GoldenFile& file) {
  std::ifstream in(path_of(file));
  std::stringstream text;
  text << in.rdbuf();
  const io::Json all = io::Json::parse(text.str(), nullptr, false);
  return all.is_object() && all.contains("cases") ? all["cases"] : io::Json::array();
}

// Every file's cases, one list.
const io::Json& golden() {
  static const io::Json cases = [] {
    io::Json all = io::Json::array();
    for (const GoldenFile& file : kFiles)
      for (const io::Json& c : cases_of(file)) all.push_back(c);
    return all;
  }();
  return cases;
}

std::vector<double> values(const io::Json& list) { return list.get<std::vector<double>>(); }

void expect_close(const std::vector<double>& actual, const std::vector<double>& expected,
                  const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double worst = 0.0;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], kTolerance) << what << "[" << i << "]";
    worst = std::max(worst, std::fabs(actual[i] - expected[i]));
  }
  ::testing::Test::RecordProperty(what + "_maxdiff", std::to_string(worst));
}

class LayerGolden : public ::testing::TestWithParam<size_t> {};

TEST_P(LayerGolden, MatchesPyTorch) {
  const io::Json& c = golden()[GetParam()];
  SCOPED_TRACE(c["name"].get<std::string>());
  const Shape input = c["input_shape"].get<Shape>();
  const Index batch = c["batch"].get<Index>();
  const std::string config = c["layer"].dump();
  auto layer = mpiddp::testing::layer<double>(config.c_str(), input);
  EXPECT_EQ(layer->output_shape(), c["output_shape"].get<Shape>());

  LayerHarness<double> h(*layer, batch);
  h.set_parameters(values(c["parameters"]));
  const std::vector<double> x = values(c["x"]);
  const std::vector<double> y = h.forward(x, batch);
  expect_close(y, values(c["y"]), "y");
  const std::vector<double> dx = h.backward(x, y, values(c["dy"]), batch);
  expect_close(dx, values(c["dx"]), "dx");
  expect_close(h.grads, values(c["gradients"]), "gradients");
}

INSTANTIATE_TEST_SUITE_P(PyTorch, LayerGolden, ::testing::Range<size_t>(0, golden().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return golden()[info.param]["name"].get<std::string>();
                         });

TEST(GoldenFiles, CoverEveryType) {
  for (const GoldenFile& file : kFiles) {
    const io::Json cases = cases_of(file);
    ASSERT_FALSE(cases.empty()) << "no cases in " << path_of(file) << "; regenerate it with /usr/bin/python3 tools/golden/"
                                << file.name << ".py";
    std::set<std::string> types;
    for (const io::Json& c : cases) types.insert(c["layer"]["type"].get<std::string>());
    EXPECT_EQ(types, file.types) << file.name;
  }
}

}  // namespace
}  // namespace mpiddp::nn
