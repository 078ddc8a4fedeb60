#pragma once
// The deterministic mode's per-step state (docs/design.md, Note [deterministic mode] in
// src/train/trainer_deterministic.cpp): the rank's chunk results and the exact sum that
// combines them. Allocated once, when the trainer is built.
#include <memory>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/exact_sum.hpp"

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
  std::vector<T, HugePageAllocator<T>> terms;  // (L, width) this rank's chunks, in chunk order
  std::vector<double> mean;           // (width) the mean over all C chunks, every rank alike
  std::vector<double> saved_buffers;  // (buffer_values) the buffers before the step
  std::vector<int64_t> saved_counters;
  // Whether the steps take the chunked pass (Note [the chunked pass]): every layer supports
  // it, Eigen computes the products, and a chunk's columns fill Eigen's 4-column panels (an
  // epoch's shorter last step checks its own chunks again).
  bool chunked_pass = false;
  std::vector<Index> samples;    // (B / N) the chunks' sample indices, chunk after chunk
  std::vector<Index> positions;  // (B / N) their positions in the step's global batch
  std::vector<double> eval_terms;     // (blocks, 2) [loss sum, correct] of each evaluation block
  std::unique_ptr<distributed::ExactSum> step_sum;  // groups: the tensors, the loss, the buffers
  std::unique_ptr<distributed::ExactSum> eval_sum;  // groups: the loss sum, the correct count
};

}  // namespace mpiddp::train
