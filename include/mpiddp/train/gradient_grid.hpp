#pragma once
// The deterministic chunked pass's gradients, added onto the fixed-point sum's integer grid as
// each layer's backward makes them (Note [gradients onto the grid] in
// src/train/gradient_grid.cpp), then summed over the ranks and converted back once.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/communicator.hpp"
#include "mpiddp/kernels/gradient_grid.hpp"

namespace mpiddp::train {

template <typename T>
class ChunkGradientGrid final : public kernels::GradientGrid {
 public:
  // tensor_bounds: the parameter tensors' offsets, ascending, then P
  // (Model::tensor_bounds); chunks: C, the most
  // terms any value's sum has; shared_sums: P int64 in the node's shared window, which the
  // shm path sums where they lie (Communicator::allocate_shared_buffer), or null.
  ChunkGradientGrid(distributed::Communicator& comm, std::vector<size_t> tensor_bounds, int64_t chunks,
                    int64_t* shared_sums);

  // Before a step's pass: the layers' gradient views start at `views`.
  void begin_step(const T* views);
  // After it: the int64 sums over every rank on `algorithm`'s path, and gradients[i] = the
  // sum of every chunk's gradient i / divisor, the same bits on every rank at every N (NaN
  // for a tensor some rank's bound found non-finite). Collective.
  void finish(double divisor, T* gradients, distributed::ReduceAlgorithm algorithm);
  // The same, but only gradients [begin, end) are converted and written: a rank's part of the
  // gradient (reduce.shard "gradients"). The int64 sums are whole on every rank (every rank
  // sums every value, exact in any order); no other gradient is touched. Collective.
  void finish_part(double divisor, T* gradients, size_t begin, size_t end, distributed::ReduceAlgorithm algorithm);
  // Whether this rank's gradients of the last step were all finite.
  bool local_finite() const { return local_finite_; }

  void max_over_ranks(double* values, size_t count) override;
  Tensor tensor(const void* view, double bound) override;
  void add(const float* values, size_t count, const Tensor& tensor, size_t at, bool first) override;
  void add(const double* values, size_t count, const Tensor& tensor, size_t at, bool first) override;
  void* scratch(size_t bytes) override;

 private:
  template <typename V>
  void put(const V* values, size_t count, const Tensor& tensor, size_t at, bool first);
  void check_every_tensor_placed() const;
  kernels::FixedPointGroups groups(double divisor) const;
  distributed::Communicator& comm_;
  std::vector<size_t> begins_;  // (G + 1)
  int64_t chunks_;
  std::vector<int64_t, HugePageAllocator<int64_t>> own_sums_;  // (P) unless shared
  int64_t* sums_ = nullptr;                                     // (P) own_sums_ or shared
  std::vector<int> shift_;      // (G)
  std::vector<char> finite_;    // (G)
  std::vector<char> placed_;    // (G) whether this step's pass set the tensor's grid
  bool local_finite_ = true;
  const T* views_ = nullptr;
  std::vector<std::byte, HugePageAllocator<std::byte>> scratch_;
};

}  // namespace mpiddp::train
