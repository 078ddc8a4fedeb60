// The deterministic mode's chunked pass (Note [the chunked pass] in
// src/train/trainer_deterministic.cpp): chunks side by side in one forward and one backward
// give every chunk the outputs and the parameter gradients a pass over that chunk alone
// gives, bit for bit, whichever place the chunk takes among how many others. That is what
// makes the chunked pass's results the same at every world size.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "../support/layer_harness.hpp"
#include "mpiddp/nn/gemm.hpp"
#include "mpiddp/nn/sequential.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::specs;
using mpiddp::testing::test_values;

// Odd sizes, so that the products have row tails and the chunks start off cache lines.
const Shape kInput = {37};
const char* const kLayers = R"([
    {"type": "linear", "out": 29}, {"type": "relu"}, {"type": "dropout", "p": 0.3},
    {"type": "linear", "out": 11}, {"type": "relu"}, {"type": "flatten"},
    {"type": "linear", "out": 7}])";
constexpr Index kChunk = 8;  // a multiple of Eigen's 4-column panel
constexpr Index kChunks = 5;

template <typename T>
struct ChunkResult {
  std::vector<T> output;     // (outputs, kChunk)
  std::vector<T> gradients;  // (P)
};

// Every chunk's input, output gradient and positions: fixed per chunk, whatever its place.
template <typename T>
struct Chunks {
  std::vector<std::vector<T>> x, dy;
  std::vector<std::vector<Index>> positions;
};

template <typename T>
Chunks<T> make_chunks(const Sequential<T>& model) {
  Chunks<T> c;
  for (Index q = 0; q < kChunks; ++q) {
    const auto x = test_values(model.inputs() * kChunk, static_cast<unsigned>(10 + q));
    const auto dy = test_values(model.outputs() * kChunk, static_cast<unsigned>(20 + q));
    c.x.emplace_back(x.begin(), x.end());
    c.dy.emplace_back(dy.begin(), dy.end());
    std::vector<Index> positions;
    for (Index i = 0; i < kChunk; ++i) positions.push_back(q + kChunks * i);
    c.positions.push_back(positions);
  }
  return c;
}

template <typename T>
PassContext training_context() {
  PassContext pass;
  pass.seed = 5;
  pass.step = 3;
  return pass;
}

// Chunk q on its own: the chunk-by-chunk step's pass, gradients added into zeros.
template <typename T>
ChunkResult<T> alone(Sequential<T>& model, const Chunks<T>& c, Index q) {
  ChunkResult<T> r;
  r.gradients.assign(static_cast<size_t>(model.parameter_count()), T(0));
  model.bind_gradient_views(r.gradients.data());
  PassContext pass = training_context<T>();
  pass.positions = c.positions[q].data();
  ConstMatrixView<T> x(c.x[q].data(), model.inputs(), kChunk);
  const auto out = model.forward(pass, x);
  r.output.assign(out.data(), out.data() + out.size());
  std::copy(c.dy[q].begin(), c.dy[q].end(), model.output_gradient().data());
  model.backward(pass, x);
  model.bind_gradient_views(nullptr);
  return r;
}

// The chunks `order` side by side in one pass, each one's gradients in its own term of
// `stride` values (more than P, as the trainer's padded terms), which start as garbage:
// the chunked pass writes them.
template <typename T>
std::vector<ChunkResult<T>> together(Sequential<T>& model, const Chunks<T>& c,
                                     const std::vector<Index>& order) {
  const Index count = static_cast<Index>(order.size()) * kChunk, p = model.parameter_count();
  const Index stride = p + 5;
  std::vector<T> x, dy, terms(static_cast<size_t>(stride * static_cast<Index>(order.size())), T(7));
  std::vector<Index> positions;
  for (Index q : order) {
    x.insert(x.end(), c.x[q].begin(), c.x[q].end());
    dy.insert(dy.end(), c.dy[q].begin(), c.dy[q].end());
    positions.insert(positions.end(), c.positions[q].begin(), c.positions[q].end());
  }
  model.bind_gradient_views(terms.data());
  PassContext pass = training_context<T>();
  pass.positions = positions.data();
  pass.chunk_columns = kChunk;
  pass.chunk_gradient_stride = stride;
  ConstMatrixView<T> xs(x.data(), model.inputs(), count);
  const auto out = model.forward(pass, xs);
  std::copy(dy.begin(), dy.end(), model.output_gradient().data());
  std::vector<ChunkResult<T>> results(order.size());
  for (size_t t = 0; t < order.size(); ++t) {
    const T* o = out.data() + static_cast<Index>(t) * kChunk * model.outputs();
    results[t].output.assign(o, o + kChunk * model.outputs());
  }
  model.backward(pass, xs);
  model.bind_gradient_views(nullptr);
  for (size_t t = 0; t < order.size(); ++t) {
    const T* g = terms.data() + static_cast<Index>(t) * stride;
    results[t].gradients.assign(g, g + p);
  }
  return results;
}

template <typename T>
void expect_chunks_keep_their_bits() {
  use_gemm_backend(GemmBackend::kEigen, 1);
  Sequential<T> model(kInput, specs(kLayers), kChunks * kChunk);
  ASSERT_TRUE(model.layers().supports_chunked_pass());
  model.initialize(9);
  const Chunks<T> c = make_chunks(model);
  std::vector<ChunkResult<T>> reference;
  for (Index q = 0; q < kChunks; ++q) reference.push_back(alone(model, c, q));
  // Dropout drops something, and the chunks differ: the comparisons below could fail.
  ASSERT_NE(reference[0].gradients, reference[1].gradients);
  // All five in order, three in another order (as on another rank at another world size),
  // and one alone in a chunked pass.
  for (const std::vector<Index>& order : {std::vector<Index>{0, 1, 2, 3, 4}, std::vector<Index>{4, 2, 1},
                                          std::vector<Index>{3}}) {
    const auto results = together(model, c, order);
    for (size_t t = 0; t < order.size(); ++t) {
      const Index q = order[t];
      // == on the values: an overwritten zero may be -0 where an added one is +0, which the
      // fixed-point sum does not see; every other bit must agree.
      EXPECT_EQ(results[t].output, reference[q].output) << "chunk " << q << " at place " << t;
      EXPECT_EQ(results[t].gradients, reference[q].gradients) << "chunk " << q << " at place " << t;
    }
  }
}

TEST(ChunkedPass, EveryChunkGetsTheBitsOfItsOwnPassInFloat) { expect_chunks_keep_their_bits<float>(); }
TEST(ChunkedPass, EveryChunkGetsTheBitsOfItsOwnPassInDouble) { expect_chunks_keep_their_bits<double>(); }

TEST(ChunkedPass, OnlyLayersThatKeepColumnsApartSupportIt) {
  EXPECT_TRUE(Sequential<float>(kInput, specs(kLayers), 4).layers().supports_chunked_pass());
  // Transcendental functions round differently in vector and scalar code; BatchNorm
  // normalises over the batch; a convolution and a residual have not been made to.
  for (const char* layers : {R"([{"type": "linear", "out": 3}, {"type": "tanh"}])",
                             R"([{"type": "linear", "out": 3}, {"type": "sigmoid"}])",
                             R"([{"type": "linear", "out": 3}, {"type": "gelu"}])",
                             R"([{"type": "linear", "out": 3}, {"type": "batchnorm1d"}])"})
    EXPECT_FALSE(Sequential<float>(kInput, specs(layers), 4).layers().supports_chunked_pass()) << layers;
}

}  // namespace
}  // namespace mpiddp::nn
