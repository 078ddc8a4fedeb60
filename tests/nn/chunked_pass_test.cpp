// The deterministic mode's chunked pass (Note [the chunked pass] in
// src/train/trainer_deterministic.cpp): chunks side by side in one forward and one backward
// give every chunk the outputs a pass over that chunk alone gives, bit for bit, whichever
// place the chunk takes among how many others, and the same chunks in any order give the
// same gradients on the grid, bit for bit. That is what makes the chunked pass's results
// the same at every world size.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "../support/layer_harness.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/nn/gemm.hpp"
#include "mpiddp/nn/sequential.hpp"
#include "mpiddp/train/gradient_grid.hpp"

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

PassContext training_context() {
  PassContext pass;
  pass.seed = 5;
  pass.step = 3;
  return pass;
}

// Chunk q's outputs from a pass over it alone.
template <typename T>
std::vector<T> alone(Sequential<T>& model, const Chunks<T>& c, Index q) {
  PassContext pass = training_context();
  pass.positions = c.positions[q].data();
  const auto out = model.forward(pass, ConstMatrixView<T>(c.x[q].data(), model.inputs(), kChunk));
  return {out.data(), out.data() + out.size()};
}

struct Together {
  std::vector<std::vector<double>> outputs;  // per place
  std::vector<double> gradients;             // the grid's mean over the chunks
};

// The chunks `order` side by side in one chunked pass, their gradients onto a grid.
template <typename T>
Together together(Sequential<T>& model, const Chunks<T>& c, const std::vector<Index>& order) {
  const Index count = static_cast<Index>(order.size()) * kChunk;
  std::vector<T> x, dy;
  std::vector<Index> positions;
  for (Index q : order) {
    x.insert(x.end(), c.x[q].begin(), c.x[q].end());
    dy.insert(dy.end(), c.dy[q].begin(), c.dy[q].end());
    positions.insert(positions.end(), c.positions[q].begin(), c.positions[q].end());
  }
  distributed::LocalCommunicator comm;
  std::vector<Index> begins;
  for (const auto& tensor : model.tensors()) begins.push_back(tensor.offset);
  begins.push_back(model.parameter_count());
  train::ChunkGradientGrid<T> grid(comm, begins, kChunks, nullptr);
  grid.begin_step(model.gradients());
  PassContext pass = training_context();
  pass.positions = positions.data();
  pass.chunk_columns = kChunk;
  pass.gradient_grid = &grid;
  ConstMatrixView<T> xs(x.data(), model.inputs(), count);
  const auto out = model.forward(pass, xs);
  Together r;
  for (size_t t = 0; t < order.size(); ++t) {
    const T* o = out.data() + static_cast<Index>(t) * kChunk * model.outputs();
    r.outputs.emplace_back(o, o + kChunk * model.outputs());
  }
  std::copy(dy.begin(), dy.end(), model.output_gradient().data());
  model.backward(pass, xs);
  grid.finish(static_cast<double>(kChunks), model.gradients(), distributed::ReduceAlgorithm::kMpi);
  r.gradients.assign(model.gradients(), model.gradients() + model.parameter_count());
  return r;
}

template <typename T>
void expect_chunks_keep_their_bits() {
  use_gemm_backend(GemmBackend::kEigen, 1);
  Sequential<T> model(kInput, specs(kLayers), kChunks * kChunk);
  ASSERT_TRUE(model.layers().supports_chunked_pass());
  model.initialize(9);
  const Chunks<T> c = make_chunks(model);
  std::vector<std::vector<double>> reference;
  for (Index q = 0; q < kChunks; ++q) {
    const auto out = alone(model, c, q);
    reference.emplace_back(out.begin(), out.end());
  }
  ASSERT_NE(reference[0], reference[1]);
  // Outputs: every chunk's bits at any place among any number of chunks.
  for (const std::vector<Index>& order : {std::vector<Index>{0, 1, 2, 3, 4}, std::vector<Index>{4, 2, 1},
                                          std::vector<Index>{3}}) {
    const Together r = together(model, c, order);
    for (size_t t = 0; t < order.size(); ++t)
      EXPECT_EQ(r.outputs[t], reference[order[t]]) << "chunk " << order[t] << " at place " << t;
  }
  // Gradients: the same chunks in another order give the same integers on the grid, so the
  // same bits, only if every chunk's gradients kept theirs at another place.
  const Together in_order = together(model, c, {0, 1, 2, 3, 4});
  const Together shuffled = together(model, c, {3, 0, 4, 2, 1});
  ASSERT_NE(in_order.gradients, std::vector<double>(in_order.gradients.size(), 0.0));
  for (size_t i = 0; i < in_order.gradients.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint64_t>(in_order.gradients[i]), std::bit_cast<uint64_t>(shuffled.gradients[i]))
        << "gradient " << i;
}

TEST(ChunkedPass, EveryChunkKeepsItsBitsAtAnyPlaceInFloat) { expect_chunks_keep_their_bits<float>(); }
TEST(ChunkedPass, EveryChunkKeepsItsBitsAtAnyPlaceInDouble) { expect_chunks_keep_their_bits<double>(); }

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
