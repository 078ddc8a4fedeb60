#pragma once
// The deterministic mode's per-step state (docs/design.md, Note [deterministic mode] in
// src/train/trainer_deterministic.cpp): the rank's chunk results and the exact sum that
// combines them. Allocated once, when the trainer is built.
#include <memory>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/exact_sum.hpp"
#include "mpiddp/train/deterministic_gemm.hpp"
#include "mpiddp/train/gradient_grid.hpp"

namespace mpiddp::train {

template <typename T>
struct DeterministicStep {
  Index chunks = 0;        // C, over the whole global batch
  Index local_chunks = 0;  // L = C / N, this rank's
  Index parameters = 0;    // P
  Index buffer_values = 0; // the model's real buffers (BatchNorm's running statistics)
  // One chunk's results: [P gradients | the loss | the buffers after its pass | zeros to a
  // whole cache line | the stop vote] = width.
  size_t width = 0;
  // (L, width) this rank's chunks, in chunk order; empty when every step takes the chunked pass
  std::vector<T, HugePageAllocator<T>> terms;
  std::vector<double> mean;           // (width) the mean over all C chunks, every rank alike; as terms
  std::vector<double> saved_buffers;  // (buffer_values) the buffers before the step
  std::vector<int64_t> saved_counters;
  // Whether the steps take the chunked pass (Note [the chunked pass]): every layer supports
  // it, and the library gives a column the same bits at every width the pass makes (Note
  // [deterministic mode's library]). The pieces: the most columns one product of each kind
  // takes in a full step's pass (chunks of `chunk` samples) and in the epoch's shorter last
  // step's; none: that step goes chunk by chunk.
  Index chunk = 0, last_chunk = 0;
  PassPieces full, last;
  const PassPieces& pieces(Index size) const { return size == chunk ? full : last; }
  bool chunked_pass(Index size) const { return pieces(size).chunked(); }
  bool any_chunked_pass() const { return full.chunked() || last.chunked(); }
  bool every_step_chunked() const { return full.chunked() && last.chunked(); }
  std::vector<Index> samples;    // (B / N) the chunks' sample indices, chunk after chunk
  std::vector<Index> positions;  // (B / N) their positions in the step's global batch

  // Local chunk t of `size` samples into samples and positions from index `at`: local chunk
  // t of rank r is global chunk q = N t + r, at local indices t + L i and positions q + C i
  // of the step's batch (Note [deterministic mode], 1).
  void take_chunk(Index t, Index size, const Index* step_samples, Index world, Index rank, Index at) {
    for (Index i = 0; i < size; ++i) {
      samples[at + i] = step_samples[t + local_chunks * i];
      positions[at + i] = world * t + rank + chunks * i;
    }
  }
  std::vector<double> eval_terms;     // (blocks, 2) [loss sum, correct] of each evaluation block
  // The chunked pass puts the gradients onto `grid` (Note [gradients onto the grid]); the
  // chunks' losses and the stop vote go through side_sum, groups [the loss | the vote].
  std::unique_ptr<ChunkGradientGrid<T>> grid;
  std::vector<double> side_terms;  // (L, 2)
  std::unique_ptr<distributed::ExactSum> side_sum;
  bool step_on_grid = false;  // whether the last step took the chunked pass
  // groups: the tensors, the loss, the buffers; null when every step takes the chunked pass
  std::unique_ptr<distributed::ExactSum> step_sum;
  std::unique_ptr<distributed::ExactSum> eval_sum;  // groups: the loss sum, the correct count
};

}  // namespace mpiddp::train
