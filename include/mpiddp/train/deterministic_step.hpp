#pragma once
// Deterministic mode's step (config "deterministic", docs/design.md, Note [deterministic
// mode] in src/train/deterministic_step.cpp): the same bits at every world size. The global
// batch is cut into C chunks that go through forward and backward alike at every N, and the
// chunks' results are added exactly. Its state is allocated once, when it is built and in
// start().
#include <memory>
#include <vector>

#include "mpiddp/core/memory.hpp"
#include "mpiddp/core/types.hpp"
#include "mpiddp/distributed/exact_sum.hpp"
#include "mpiddp/train/deterministic_gemm.hpp"
#include "mpiddp/train/gradient_grid.hpp"
#include "mpiddp/train/step_strategy.hpp"

namespace mpiddp::train {

// The values of one chunk's term: the P gradients, the loss, the buffer values and the stop
// vote, padded to whole cache lines (Note [deterministic mode]).
template <typename T>
size_t deterministic_term_width(Index parameters, Index buffer_values) {
  return scratch_values_bytes<T>(parameters + 1 + buffer_values + 1) / sizeof(T);
}

// The most the step holds beyond the model and the optimizer, in bytes, for memory.limit_mb
// (train/memory_plan.hpp), before it is built: which pass runs is decided at start, so both
// are counted. Steps that go chunk by chunk: this rank's chunks' terms (chunks / world of
// them), their mean and their exact sum (doubles and int64, a term's width each); the
// chunked pass: the gradients' grid (P int64).
template <typename T>
double deterministic_step_bytes(int64_t chunks, int world, Index parameters, Index buffer_values) {
  const double width = static_cast<double>(deterministic_term_width<T>(parameters, buffer_values));
  const double local_chunks = static_cast<double>(chunks / world);
  return local_chunks * width * sizeof(T) + 2.0 * width * 8.0 + static_cast<double>(parameters) * 8.0;
}

template <typename T>
class DeterministicStep : public StepStrategy<T> {
 public:
  // Local: the chunks, the thread and the fixed GEMM blocking; start() does the rest.
  explicit DeterministicStep(const StepParts<T>& parts);

  // The library and the pass, decided by rank 0 (Note [deterministic mode's library]), and
  // the sums that the pass needs.
  GemmChoice start(int threads) override;
  // One thread per rank: it decides the order of the products' additions.
  int threads(int /*chosen*/) const override { return 1; }
  // Returns 0: the step's loss comes out of reduce().
  double compute_gradients(const Index* samples, Index count) override;
  StepOutcome reduce(double local_loss) override;
  double update(double lr) override { return parts_.optimizer.step(model_.parameters(), model_.gradients(), lr); }
  void swap_in_average(T* kept) override { parts_.optimizer.swap_in_average(model_.parameters(), kept); }
  void restore_parameters(const T* kept) override { parts_.optimizer.restore_parameters(model_.parameters(), kept); }
  // Fixed blocks of B/C samples, the per-block sums added exactly.
  nn::EvalSums evaluate(const data::Dataset<T>& set) override;
  void describe(io::Json& run_record) const override;

 protected:
  // Where the step's exact mean over the C chunks goes, the same bits for every value at
  // every N: here into the model's whole gradient buffer, every rank alike; with reduce.shard
  // "gradients", into this rank's part of it alone (DeterministicGradientPartStep).
  // From the chunked pass's grid (collective), or from the chunks' summed terms (mean: the
  // width's values, every rank alike).
  virtual void keep_grid_mean(ChunkGradientGrid<T>& grid, double divisor);
  virtual void keep_chunk_mean(const std::vector<double>& mean);
  // Whether the kept mean and the mean loss (rounded to T) are all finite, alike on every rank.
  virtual bool mean_finite(T loss);
  // An evaluation round in which the other ranks pass a block and this rank has none left.
  virtual void evaluation_round_without_block() {}

  StepParts<T> parts_;
  nn::Model<T>& model_;
  Index parameters_ = 0;     // P

 private:
  const PassPieces& pieces(Index size) const { return size == chunk_ ? full_ : last_; }
  bool chunked_pass(Index size) const { return pieces(size).chunked(); }
  bool any_chunked_pass() const { return full_.chunked() || last_.chunked(); }
  bool every_step_chunked() const { return full_.chunked() && last_.chunked(); }
  // Local chunk t of `size` samples into samples_ and positions_ from index `at`: local
  // chunk t of rank r is global chunk q = N t + r, at local indices t + L i and positions
  // q + C i of the step's batch (Note [deterministic mode], 1).
  void take_chunk(Index t, Index size, const Index* step_samples, Index at);
  void pass_chunk_by_chunk(const Index* samples, Index size);
  void pass_chunks_together(const Index* samples, Index size);
  StepOutcome reduce_chunks();
  StepOutcome reduce_grid();

  BatchPipeline<T>& pipeline_;
  Index chunks_ = 0;         // C, over the whole global batch
  Index local_chunks_ = 0;   // L = C / N, this rank's
  Index buffer_values_ = 0;  // the model's real buffers (BatchNorm's running statistics)
  // One chunk's results: [P gradients | the loss | the buffers after its pass | zeros to a
  // whole cache line | the stop vote] = width.
  size_t width_ = 0;
  // (L, width) this rank's chunks, in chunk order; empty when every step takes the chunked pass
  std::vector<T, HugePageAllocator<T>> terms_;
  std::vector<double> mean_;           // (width) the mean over all C chunks, every rank alike; as terms
  std::vector<double> saved_buffers_;  // (buffer_values) the buffers before the step
  std::vector<int64_t> saved_counters_;
  // Whether the steps take the chunked pass (Note [the chunked pass]): every layer supports
  // it, and the library gives a column the same bits at every width the pass makes (Note
  // [deterministic mode's library]). The pieces: the most columns one product of each kind
  // takes in a full step's pass (chunks of `chunk` samples) and in the epoch's shorter last
  // step's; none: that step goes chunk by chunk.
  Index chunk_ = 0, last_chunk_ = 0;
  PassPieces full_, last_;
  std::vector<Index> samples_;    // (B / N) the chunks' sample indices, chunk after chunk
  std::vector<Index> positions_;  // (B / N) their positions in the step's global batch
  std::vector<double> chunk_losses_;  // (L) each chunk's mean loss, in the chunked pass
  std::vector<double> eval_terms_;    // (blocks, 2) [loss sum, correct] of each evaluation block
  // The chunked pass puts the gradients onto `grid` (Note [gradients onto the grid]); the
  // chunks' losses and the stop vote go through side_sum, groups [the loss | the vote].
  std::unique_ptr<ChunkGradientGrid<T>> grid_;
  std::vector<double> side_terms_;  // (L, 2)
  std::unique_ptr<distributed::ExactSum> side_sum_;
  bool step_on_grid_ = false;  // whether the last step took the chunked pass
  // groups: the tensors, the loss, the buffers; null when every step takes the chunked pass
  std::unique_ptr<distributed::ExactSum> step_sum_;
  std::unique_ptr<distributed::ExactSum> eval_sum_;  // groups: the loss sum, the correct count
};

}  // namespace mpiddp::train
