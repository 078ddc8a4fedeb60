// The deterministic mode's chunked pass (Note [the chunked pass] in
// src/train/deterministic_step.cpp): chunks side by side in one forward and one backward
// give every chunk the outputs a pass over that chunk alone gives, bit for bit, whichever
// place the chunk takes among how many others, and the same chunks in any order give the
// same gradients on the grid, bit for bit. That is what makes the chunked pass's results
// the same at every world size.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <bit>
#include <cstdint>
#include <vector>

#include "../support/layer_harness.hpp"
#include "mpiddp/core/memory.hpp"
#include "mpiddp/kernels/fixed_point.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/nn/model.hpp"
#include "mpiddp/train/chunked_pass_gradients.hpp"
#include "mpiddp/train/gradient_grid.hpp"

namespace mpiddp::nn {
namespace {

using mpiddp::testing::specs;
using mpiddp::testing::test_values;

// Odd sizes, so that the products have row tails and the chunks start off cache lines.
const Shape kChunkedInput = {37};
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
Chunks<T> make_chunks(const Model<T>& model) {
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
std::vector<T> alone(Model<T>& model, const Chunks<T>& c, Index q) {
  PassContext pass = training_context();
  pass.positions = c.positions[q].data();
  const auto out = model.forward(pass, ConstMatrixView<T>(c.x[q].data(), model.inputs(), kChunk));
  return {out.data(), out.data() + out.size()};
}

// The chunks `order` side by side, as a rank's batch holds them.
template <typename T>
struct Batch {
  std::vector<T> x, dy;
  std::vector<Index> positions;
  Index columns = 0;
};

template <typename T>
Batch<T> side_by_side(const Chunks<T>& c, const std::vector<Index>& order) {
  Batch<T> b;
  for (Index q : order) {
    b.x.insert(b.x.end(), c.x[q].begin(), c.x[q].end());
    b.dy.insert(b.dy.end(), c.dy[q].begin(), c.dy[q].end());
    b.positions.insert(b.positions.end(), c.positions[q].begin(), c.positions[q].end());
  }
  b.columns = static_cast<Index>(order.size()) * kChunk;
  return b;
}

// One chunked pass of the batch, forward and backward, its gradients onto `grid`; the outputs.
template <typename T>
std::vector<T> chunked_pass(Model<T>& model, const Batch<T>& b, kernels::GradientGrid& grid) {
  PassContext pass = training_context();
  pass.positions = b.positions.data();
  train::ChunkGradientsOnGrid onto_grid(grid, kChunk, 0, 0);
  pass.parameter_gradients = &onto_grid;
  ConstMatrixView<T> x(b.x.data(), model.inputs(), b.columns);
  const auto out = model.forward(pass, x);
  std::vector<T> outputs(out.data(), out.data() + out.size());
  std::copy(b.dy.begin(), b.dy.end(), model.output_gradient().data());
  model.backward(pass, x);
  return outputs;
}

struct Together {
  std::vector<std::vector<double>> outputs;  // per place
  std::vector<double> gradients;             // the grid's mean over the chunks
};

// The chunks `order` side by side in one chunked pass, their gradients onto a grid.
template <typename T>
Together together(Model<T>& model, const Chunks<T>& c, const std::vector<Index>& order) {
  distributed::LocalCommunicator comm;
  train::ChunkGradientGrid<T> grid(comm, model.tensor_bounds(), kChunks, nullptr);
  grid.begin_step(model.gradients());
  const std::vector<T> out = chunked_pass(model, side_by_side(c, order), grid);
  Together r;
  for (size_t t = 0; t < order.size(); ++t) {
    const T* o = out.data() + static_cast<Index>(t) * kChunk * model.outputs();
    r.outputs.emplace_back(o, o + kChunk * model.outputs());
  }
  grid.finish(static_cast<double>(kChunks), model.gradients(), distributed::ReduceAlgorithm::kMpi);
  r.gradients.assign(model.gradients(), model.gradients() + model.parameter_count());
  return r;
}

template <typename T>
void expect_chunks_keep_their_bits() {
  kernels::use_gemm_backend(kernels::GemmBackend::kEigen, 1);
  Model<T> model(kChunkedInput, specs(kLayers), kChunks * kChunk);
  ASSERT_TRUE(model.layers().supports_chunked_pass(kChunk));
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

// A grid that keeps every block of values a layer adds to it, per tensor and offset, in the
// order added, and leaves the maxima as they are: what it holds is each chunk's gradients.
// It also keeps real int64 sums per tensor on a fixed grid, as the trainer's grid does: a
// weight gradient made by the grid product (kernels/grid_product.hpp) reaches the grid only as
// those sums, every chunk's at once.
class RecordingGrid final : public kernels::GradientGrid {
 public:
  using Key = std::pair<const void*, size_t>;  // the tensor's gradient view, the offset
  static constexpr int kShift = 40;            // the test's gradients are far below 2^22
  explicit RecordingGrid(Index parameters) : parameters_(static_cast<size_t>(parameters)) {}
  void max_over_ranks(double*, size_t) override {}
  Tensor tensor(const void* view, double) override {
    std::vector<int64_t>& tensor_sums = sums[view];
    tensor_sums.resize(parameters_);  // a tensor holds at most every parameter
    views_[tensor_sums.data()] = view;
    return {tensor_sums.data(), kShift, true};
  }
  void add(const float* values, size_t count, const Tensor& t, size_t at, bool first) override {
    keep(values, count, t, at, first);
  }
  void add(const double* values, size_t count, const Tensor& t, size_t at, bool first) override {
    keep(values, count, t, at, first);
  }
  void* scratch(size_t bytes) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    return scratch_.data();
  }
  std::map<Key, std::vector<std::vector<double>>> added;
  std::map<const void*, std::vector<int64_t>> sums;  // per tensor's view

 private:
  template <typename V>
  void keep(const V* values, size_t count, const Tensor& t, size_t at, bool first) {
    added[{views_.at(t.sums), at}].emplace_back(values, values + count);
    kernels::add_to_grid(values, count, t.shift, t.sums + at,
                             first ? kernels::OntoGrid::kSet : kernels::OntoGrid::kAdd);
  }
  size_t parameters_;
  std::map<const int64_t*, const void*> views_;
  std::vector<std::byte, HugePageAllocator<std::byte>> scratch_;
};

// The chunks `order` in one chunked pass: what the layers put on the grid.
struct Recorded {
  std::map<RecordingGrid::Key, std::vector<std::vector<double>>> added;  // one entry per chunk, in order
  std::map<const void*, std::vector<int64_t>> sums;
};

template <typename T>
Recorded recorded(Model<T>& model, const Chunks<T>& c, const std::vector<Index>& order) {
  RecordingGrid grid(model.parameter_count());
  chunked_pass(model, side_by_side(c, order), grid);
  return {grid.added, grid.sums};
}

// Every chunk's gradients, as the layers hand them to the grid, have the same bits in a pass
// of 5 chunks, of 3 and of 1: the width of the pass (what N changes) reaches none of them,
// through the input gradients of the later layers included. Where a layer hands them over
// as int64 sums (the grid product), the sums of a pass of several chunks are those of the
// passes of one chunk each, added: each chunk's values were the same in both.
template <typename T>
void expect_chunk_gradients_keep_their_bits() {
  kernels::use_gemm_backend(kernels::GemmBackend::kEigen, 1);
  Model<T> model(kChunkedInput, specs(kLayers), kChunks * kChunk);
  model.initialize(9);
  const Chunks<T> c = make_chunks(model);
  for (const std::vector<Index>& order : {std::vector<Index>{0, 1, 2, 3, 4}, std::vector<Index>{4, 2, 1}}) {
    const Recorded many = recorded(model, c, order);
    ASSERT_FALSE(many.sums.empty());
    std::map<const void*, std::vector<int64_t>> added_up;
    for (size_t t = 0; t < order.size(); ++t) {
      const Recorded one = recorded(model, c, {order[t]});
      ASSERT_EQ(one.added.size(), many.added.size());
      for (const auto& [key, chunks] : many.added) {
        ASSERT_EQ(chunks.size(), order.size());
        ASSERT_EQ(one.added.at(key).size(), 1u);
        EXPECT_EQ(chunks[t], one.added.at(key)[0]) << "chunk " << order[t] << " at place " << t << ", offset " << key.second;
      }
      for (const auto& [view, sums] : one.sums) {
        std::vector<int64_t>& total = added_up[view];
        total.resize(sums.size());
        for (size_t i = 0; i < sums.size(); ++i) total[i] += sums[i];
      }
    }
    ASSERT_EQ(added_up.size(), many.sums.size());
    for (const auto& [view, sums] : many.sums) {
      ASSERT_NE(sums, std::vector<int64_t>(sums.size(), 0));
      EXPECT_EQ(sums, added_up.at(view)) << "the sums of the tensor at " << view;
    }
  }
}

TEST(ChunkedPass, EveryChunksGradientsKeepTheirBitsAtAnyWidthInFloat) { expect_chunk_gradients_keep_their_bits<float>(); }
TEST(ChunkedPass, EveryChunksGradientsKeepTheirBitsAtAnyWidthInDouble) { expect_chunk_gradients_keep_their_bits<double>(); }

// The bias gradient in the default pass: the same bits wherever the gradient buffer starts
// (Eigen's row sums split rows between vector and scalar code by that address).
TEST(ChunkedPass, BiasGradientDoesNotFollowTheBuffersAddress) {
  kernels::use_gemm_backend(kernels::GemmBackend::kEigen, 1);
  Model<float> model(kChunkedInput, specs(kLayers), kChunk);
  model.initialize(9);
  const Chunks<float> c = make_chunks(model);
  const Index p = model.parameter_count();
  std::vector<float> reference;
  for (Index offset = 0; offset < 16; ++offset) {
    std::vector<float> buffer(static_cast<size_t>(p + 16), 0.0f);
    model.bind_gradient_views(buffer.data() + offset);
    PassContext pass = training_context();
    pass.positions = c.positions[0].data();
    ConstMatrixView<float> x(c.x[0].data(), model.inputs(), kChunk);
    model.forward(pass, x);
    std::copy(c.dy[0].begin(), c.dy[0].end(), model.output_gradient().data());
    model.backward(pass, x);
    model.bind_gradient_views(nullptr);
    const std::vector<float> gradients(buffer.begin() + offset, buffer.begin() + offset + p);
    if (offset == 0) reference = gradients;
    for (Index i = 0; i < p; ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(gradients[i]), std::bit_cast<uint32_t>(reference[i]))
          << "gradient " << i << " with the buffer " << offset << " floats on";
  }
}

TEST(ChunkedPass, EveryChunkKeepsItsBitsAtAnyPlaceInFloat) { expect_chunks_keep_their_bits<float>(); }
TEST(ChunkedPass, EveryChunkKeepsItsBitsAtAnyPlaceInDouble) { expect_chunks_keep_their_bits<double>(); }

TEST(ChunkedPass, LinearNeedsWholePanelsAndAGemmSizedProduct) {
  const char* linear = R"([{"type": "linear", "out": 7}])";
  EXPECT_TRUE(Model<float>(kChunkedInput, specs(linear), 8).layers().supports_chunked_pass(8));
  EXPECT_FALSE(Model<float>(kChunkedInput, specs(linear), 8).layers().supports_chunked_pass(6));  // not whole panels
  // 3 inputs + 2 outputs + 4 columns is below Eigen's size for a GEMM at one chunk a pass.
  EXPECT_FALSE(Model<float>({3}, specs(R"([{"type": "linear", "out": 2}])"), 8).layers().supports_chunked_pass(4));
  EXPECT_TRUE(Model<float>({3}, specs(R"([{"type": "linear", "out": 2}])"), 16).layers().supports_chunked_pass(16));
}

TEST(ChunkedPass, OnlyLayersThatKeepColumnsApartSupportIt) {
  EXPECT_TRUE(Model<float>(kChunkedInput, specs(kLayers), 4).layers().supports_chunked_pass(kChunk));
  // Transcendental functions round differently in vector and scalar code; BatchNorm
  // normalises over the batch; a convolution and a residual have not been made to.
  for (const char* layers : {R"([{"type": "linear", "out": 3}, {"type": "tanh"}])",
                             R"([{"type": "linear", "out": 3}, {"type": "sigmoid"}])",
                             R"([{"type": "linear", "out": 3}, {"type": "gelu"}])",
                             R"([{"type": "linear", "out": 3}, {"type": "batchnorm1d"}])"})
    EXPECT_FALSE(Model<float>(kChunkedInput, specs(layers), 4).layers().supports_chunked_pass(kChunk)) << layers;
}

}  // namespace
}  // namespace mpiddp::nn
