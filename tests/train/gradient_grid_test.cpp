// The chunked pass's gradients onto the integer grid (Note [gradients onto the grid] in
// src/train/gradient_grid.cpp), on one process: the mean over the chunks of each chunk's own
// gradients, to the grid's precision; a non-finite input makes its tensors NaN.
#include "mpiddp/train/chunked_pass_gradients.hpp"
#include "mpiddp/train/gradient_grid.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "../support/layer_harness.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/nn/model.hpp"

namespace mpiddp::train {
namespace {

using mpiddp::testing::specs;
using mpiddp::testing::test_values;

constexpr Index kChunk = 4, kChunks = 3;
const char* const kLayers = R"([{"type": "linear", "out": 6}, {"type": "relu"}, {"type": "linear", "out": 4}])";

struct Pass {
  std::vector<double> x, dy;
};

Pass make_pass(const nn::Model<double>& model) {
  return {test_values(model.inputs() * kChunk * kChunks, 1), test_values(model.outputs() * kChunk * kChunks, 2)};
}

// One chunked pass over all chunks, its gradients onto the grid (not yet finished).
void pass_onto(ChunkGradientGrid<double>& grid, nn::Model<double>& model, const Pass& p) {
  grid.begin_step(model.gradients());
  nn::PassContext pass;
  ChunkGradientsOnGrid onto_grid(grid, kChunk, 0, 0);
  pass.parameter_gradients = &onto_grid;
  ConstMatrixView<double> x(p.x.data(), model.inputs(), kChunk * kChunks);
  model.forward(pass, x);
  std::copy(p.dy.begin(), p.dy.end(), model.output_gradient().data());
  model.backward(pass, x);
}

// The grid's gradients of one chunked pass over all chunks.
std::vector<double> on_grid(nn::Model<double>& model, const Pass& p, bool* finite) {
  distributed::LocalCommunicator comm;
  ChunkGradientGrid<double> grid(comm, model.tensor_bounds(), kChunks, nullptr);
  pass_onto(grid, model, p);
  grid.finish(static_cast<double>(kChunks), model.gradients(), distributed::ReduceAlgorithm::kMpi);
  *finite = grid.local_finite();
  return {model.gradients(), model.gradients() + model.parameter_count()};
}

// The mean of the chunks' gradients, each chunk's from a pass of its own, summed in double.
std::vector<double> mean_of_chunks(nn::Model<double>& model, const Pass& p) {
  std::vector<double> mean(static_cast<size_t>(model.parameter_count()), 0.0);
  for (Index t = 0; t < kChunks; ++t) {
    model.zero_gradients();
    ConstMatrixView<double> x(p.x.data() + t * kChunk * model.inputs(), model.inputs(), kChunk);
    model.forward(x);
    const double* dy = p.dy.data() + t * kChunk * model.outputs();
    std::copy(dy, dy + kChunk * model.outputs(), model.output_gradient().data());
    model.backward(x);
    for (size_t i = 0; i < mean.size(); ++i) mean[i] += model.gradients()[i] / kChunks;
  }
  return mean;
}

TEST(GradientGrid, GivesTheMeanOfTheChunksGradientsToTheGridsPrecision) {
  kernels::use_gemm_backend(kernels::GemmBackend::kEigen, 1);
  nn::Model<double> model({9}, specs(kLayers), kChunk * kChunks);
  model.initialize(4);
  const Pass p = make_pass(model);
  bool finite = false;
  const std::vector<double> grid = on_grid(model, p, &finite);
  const std::vector<double> mean = mean_of_chunks(model, p);
  EXPECT_TRUE(finite);
  // Each tensor's grid keeps about 62 - log2(C) - (how far the bound exceeds the largest
  // value) bits; 1e-12 of the tensor's largest gradient is far looser than that and far
  // tighter than any real error (a wrong chunk, a missed bias) would be.
  for (const auto& tensor : model.tensors()) {
    double largest = 0.0;
    for (Index i = tensor.offset; i < tensor.offset + tensor.size(); ++i) largest = std::max(largest, std::fabs(mean[i]));
    ASSERT_GT(largest, 0.0) << tensor.name;
    for (Index i = tensor.offset; i < tensor.offset + tensor.size(); ++i)
      EXPECT_NEAR(grid[i], mean[i], 1e-12 * largest) << tensor.name << " [" << i - tensor.offset << "]";
  }
}

TEST(GradientGrid, APartIsConvertedToTheWholesBitsAndNothingElseIsWritten) {
  // reduce.shard "gradients" in deterministic mode (Note [the exact mean in parts]): a rank
  // converts [begin, end) alone, cut inside a tensor, and must get finish's bits there.
  kernels::use_gemm_backend(kernels::GemmBackend::kEigen, 1);
  nn::Model<double> model({9}, specs(kLayers), kChunk * kChunks);
  model.initialize(4);
  const Pass p = make_pass(model);
  bool finite = false;
  const std::vector<double> whole = on_grid(model, p, &finite);
  const size_t begin = 17, end = 71;  // inside the first weight, to inside the second
  ASSERT_LT(end, whole.size());
  distributed::LocalCommunicator comm;
  ChunkGradientGrid<double> grid(comm, model.tensor_bounds(), kChunks, nullptr);
  pass_onto(grid, model, p);
  std::vector<double> out(whole.size(), -7.0);  // a value no conversion gives here
  grid.finish_part(static_cast<double>(kChunks), out.data(), begin, end, distributed::ReduceAlgorithm::kMpi);
  for (size_t i = 0; i < out.size(); ++i) {
    if (i >= begin && i < end)
      EXPECT_EQ(std::memcmp(&out[i], &whole[i], sizeof(double)), 0) << i << ": " << out[i] << " vs " << whole[i];
    else
      EXPECT_EQ(out[i], -7.0) << i << " lies outside the part";
  }
}

TEST(GradientGrid, ANonFiniteInputMakesItsLayersTensorsNaN) {
  kernels::use_gemm_backend(kernels::GemmBackend::kEigen, 1);
  nn::Model<double> model({9}, specs(kLayers), kChunk * kChunks);
  model.initialize(4);
  Pass p = make_pass(model);
  p.x[5] = std::numeric_limits<double>::infinity();
  bool finite = true;
  const std::vector<double> grid = on_grid(model, p, &finite);
  EXPECT_FALSE(finite);
  const auto& first_weight = model.tensors()[0];
  EXPECT_TRUE(std::isnan(grid[first_weight.offset]));
}

TEST(GradientGrid, AProductThatMayOverflowTheDtypeComesOutNaN) {
  // float32 inputs and output gradients near 1e20: finite, but their products (1e40) are
  // not, and the grid cannot hold them.
  kernels::use_gemm_backend(kernels::GemmBackend::kEigen, 1);
  nn::Model<float> model({9}, specs(R"([{"type": "linear", "out": 12}])"), kChunk * kChunks);
  model.initialize(4);
  distributed::LocalCommunicator comm;
  ChunkGradientGrid<float> grid(comm, model.tensor_bounds(), kChunks, nullptr);
  grid.begin_step(model.gradients());
  nn::PassContext pass;
  ChunkGradientsOnGrid onto_grid(grid, kChunk, 0, 0);
  pass.parameter_gradients = &onto_grid;
  const std::vector<float> x(9 * kChunk * kChunks, 1e20f);
  ConstMatrixView<float> xs(x.data(), 9, kChunk * kChunks);
  model.forward(pass, xs);
  model.output_gradient().setConstant(1e20f);
  model.backward(pass, xs);
  grid.finish(static_cast<double>(kChunks), model.gradients(), distributed::ReduceAlgorithm::kMpi);
  EXPECT_FALSE(grid.local_finite());
  EXPECT_TRUE(std::isnan(model.gradients()[0]));
  EXPECT_FALSE(std::isnan(model.gradients()[9 * 12]));  // the bias: sums of 1e20, finite
}

TEST(GradientGrid, RefusesToFinishWhenATensorGotNothing) {
  distributed::LocalCommunicator comm;
  ChunkGradientGrid<float> grid(comm, {0, 10, 12}, kChunks, nullptr);
  std::vector<float> gradients(12, 0.0f);
  grid.begin_step(gradients.data());
  grid.tensor(gradients.data(), 1.0);  // the first tensor only
  EXPECT_THROW(grid.finish(3.0, gradients.data(), distributed::ReduceAlgorithm::kMpi), std::logic_error);
  EXPECT_THROW(grid.tensor(gradients.data() + 3, 1.0), std::logic_error);  // starts no tensor
}

}  // namespace
}  // namespace mpiddp::train
