// Deterministic mode's step: the same bits at every world size (config "deterministic",
// docs/design.md; include/mpiddp/train/deterministic_step.hpp).
//
// Note [deterministic mode]
// The default step's result depends on the world size N in three ways: each rank's GEMMs
// have b = B/N columns, and Eigen's blocking, vectorised tails and summation order follow
// the shapes; a rank sums its b samples' gradients in one order; and the allreduce adds the
// ranks' sums in an order of its own. Here:
//   1. The global batch is cut into C chunks (deterministic.chunks) of B/C samples. Chunk q
//      holds the samples at positions q, q + C, q + 2C, ... of the step's global batch: with
//      the sampler's strided shards (rank r holds positions r, r + N, ...) and N | C, those
//      all lie on rank q mod N, as its local chunk t = q div N, at local indices t, t + L,
//      t + 2L, ... (L = C/N). So chunk q's samples, in order, are the same at every N.
//   2. Every chunk goes through forward, loss and backward on its own: the same matrices,
//      the same shapes, the same dropout positions, at every N, on one thread (GEMM blocking
//      fixed by Eigen::setCpuCacheSizes). BatchNorm normalises over the chunk (its
//      statistics need no reduction) and its running statistics, restored before every
//      chunk, become the mean over the C chunks of each chunk's update.
//   3. The C chunk results (gradients of each chunk's mean loss, the loss, the buffers) are
//      added exactly (Note [the fixed-point sum] in distributed/exact_sum.hpp) and divided
//      by C, once: the mean over equal chunks is the gradient of the global mean loss.
// Evaluation goes the same way: fixed blocks of B/C samples, the per-block sums added exactly.
//
// Note [the chunked pass]
// Step 2 above, run chunk by chunk, repeats every product once per chunk: at 16 samples a
// chunk, mlp's weights were packed for the GEMM eight times a step for 16 columns of work
// each, and that packing cost more than the multiply-adds. Most of a pass does not need the
// chunks apart: Eigen's GEMM computes each column of its result from that column alone, with
// the same instructions for every column of a 4-column panel (docs/benchmarks.md measured
// it), so a forward product or an input gradient over all L chunks at once gives each column
// the bits it gets in its own chunk's product; an elementwise layer without a transcendental
// function does too. Only what sums over samples must stay per chunk: the loss (a mean per
// chunk) and the parameter gradients (train/chunked_pass_gradients.hpp, the destination the
// layers hand them to: each chunk's products, of the same shapes as in its own pass, go onto
// the integer grid as they are made, Note [gradients onto the grid] in gradient_grid.cpp; a
// linear layer's weight gradient by a kernel of ours that sums each chunk in registers, Note
// [the grid product] in src/kernels/grid_product.cpp). So when every layer
// supports_chunked_pass(B/C) (for linear: B/C a whole number of Eigen's 4-column panels, and
// the product above Eigen's size for a coefficient-based one) and the library computing the
// products keeps a column's bits at every width the pass makes (Eigen does; another library
// is measured, Note [deterministic mode's library]), the rank runs one forward and one
// backward over its L chunks, with chunk t in columns [t B/C, (t+1) B/C), its products cut
// into pieces of at most its forward_columns and input_gradient_columns, and keeps
// no per-chunk copy of the gradients. Whether that holds depends on the config, B/C and the library on this machine,
// never on N, so every N takes the same path. A chunk's columns start
// at another offset at every N, so nothing in such a pass may round by address: Eigen's row
// sums did (they split rows between vector and scalar code by the address of the sum), and
// linear's bias gradient adds column after column instead. BatchNorm normalises over a
// chunk, and its statistics would need per-chunk groups: a model with it goes chunk by chunk.
#include <Eigen/Core>

#include <algorithm>
#include <stdexcept>

#include "mpiddp/core/finite.hpp"
#include "mpiddp/kernels/grid_product.hpp"
#include "mpiddp/train/chunked_pass_gradients.hpp"
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/train/deterministic_step.hpp"
#include "mpiddp/distributed/rank0_io.hpp"

namespace mpiddp::train {

template <typename T>
DeterministicStep<T>::DeterministicStep(const StepParts<T>& parts)
    : parts_(parts), model_(parts.pipeline.model()), pipeline_(parts.pipeline) {
  const config::Config& config = parts.config;
  chunks_ = config.deterministic.chunks;
  local_chunks_ = chunks_ / parts.comm.size();
  parameters_ = model_.parameter_count();
  buffer_values_ = model_.buffer_value_count();
  // A term: the gradients, the loss, the buffers and the stop vote (Note [stopping on a
  // signal]), which rides in the sum the step already makes, as in the default mode. Zeros
  // pad it to whole cache lines, so that every term's gradients lie as the model's own
  // buffer does: backward writes them in place (compute_gradients). A zero changes
  // neither its group's largest magnitude nor its sum.
  width_ = deterministic_term_width<T>(parameters_, buffer_values_);  // rounded up to 64 bytes
  saved_buffers_.assign(static_cast<size_t>(buffer_values_), 0.0);
  saved_counters_.assign(static_cast<size_t>(model_.buffer_counter_count()), 0);
  const Index chunk = config.batch_global / chunks_;
  samples_.assign(static_cast<size_t>(local_chunks_ * chunk), 0);
  positions_.assign(static_cast<size_t>(local_chunks_ * chunk), 0);
  chunk_losses_.assign(static_cast<size_t>(local_chunks_), 0.0);
  const Index per_epoch = pipeline_.train_set().samples;
  const Index last = per_epoch % config.batch_global;
  chunk_ = chunk;
  last_chunk_ = last > 0 ? last / chunks_ : chunk;  // the epoch's shorter last step's
  // Eigen's GEMM blocking fixed rather than read from this CPU's caches: with the one
  // thread (threads()), it decides the order of the products' additions (and so what the
  // library check in start() measures).
  Eigen::setCpuCacheSizes(32 * 1024, 256 * 1024, 2 * 1024 * 1024);
  eval_sum_ = std::make_unique<distributed::ExactSum>(parts.comm, std::vector<size_t>{0, 1}, 2,
                                                      parts.reducer.algorithm());
  // The fewest samples a chunk holds: the epoch's last, shorter step has shorter chunks.
  model_.layers().check_training_batch(std::min(chunk_, last_chunk_));
  // BatchNorm takes each chunk's own statistics, and its buffers are averaged exactly, so
  // they are neither reduced during the pass nor broadcast.
  pipeline_.training_pass().statistics = nullptr;
}

template <typename T>
GemmChoice DeterministicStep<T>::start(int /*threads*/) {
  distributed::Communicator& comm = parts_.comm;
  // Eigen cuts a product's inner dimension into blocks sized from the CPU's L1 cache, which it
  // reads at run time (288 floats of k on a 32 KiB L1 with AVX2, 432 on a 48 KiB one), and
  // adds each block's sums to the result: another CPU, another order of additions. Fixed
  // sizes (a 32 KiB L1; L2 and L3 cut only rows and columns) make the order follow the shapes
  // alone, so a portable build's bits hold on every CPU (docs/isa.md), and the column check
  // below measures what every rank computes.
  Eigen::setCpuCacheSizes(32 * 1024, 512 * 1024, 8 * 1024 * 1024);
  // The library and the pass: rank 0 decides, every rank takes its answer (Note
  // [deterministic mode's library]); rank 0's error (a library not built in) is every rank's.
  GemmChoice gemm;
  int64_t decision[5] = {0, 0, 0, 0, 0};  // the backend, the full step's pieces, the last step's
  distributed::on_rank0(comm, [&] {
    DeterministicGemm chosen =
        choose_deterministic_gemm<T>(parts_.config.gemm, model_, chunks_, chunk_, last_chunk_);
    gemm = std::move(chosen.choice);
    decision[0] = static_cast<int64_t>(gemm.backend);
    decision[1] = chosen.full.forward;
    decision[2] = chosen.full.input_gradient;
    decision[3] = chosen.last.forward;
    decision[4] = chosen.last.input_gradient;
  });
  comm.broadcast(decision, sizeof decision, 0);
  gemm.backend = static_cast<kernels::GemmBackend>(decision[0]);
  full_ = {decision[1], decision[2]};
  last_ = {decision[3], decision[4]};
  // The layers that take it hold no buffers: reduce_grid sums none.
  if (any_chunked_pass() && model_.buffer_value_count() + model_.buffer_counter_count() > 0)
    throw std::logic_error("the chunked pass with a layer that holds buffers");
  const distributed::ReduceAlgorithm algorithm = parts_.reducer.algorithm();
  // The terms, their mean and their sum (P int64) only for steps that go chunk by chunk:
  // L copies of the gradients.
  if (!every_step_chunked()) {
    terms_.assign(static_cast<size_t>(local_chunks_) * width_, T(0));
    mean_.assign(width_, 0.0);
    // One grid per tensor, one for the loss, one for the buffers, one for the vote.
    std::vector<size_t> groups = model_.tensor_bounds();  // the tensors, then the loss at P
    if (buffer_values_ > 0) groups.push_back(static_cast<size_t>(parameters_ + 1));
    groups.push_back(width_ - 1);
    step_sum_ = std::make_unique<distributed::ExactSum>(comm, std::move(groups), width_, algorithm);
  }
  if (any_chunked_pass()) {
    // On the shm path the sums lie in the node's window, summed there without a copy.
    void* shared = algorithm == distributed::ReduceAlgorithm::kShm
                       ? comm.allocate_shared_buffer(static_cast<size_t>(parameters_) * sizeof(int64_t))
                       : nullptr;
    grid_ = std::make_unique<ChunkGradientGrid<T>>(comm, model_.tensor_bounds(), chunks_,
                                                   static_cast<int64_t*>(shared));
    side_terms_.assign(static_cast<size_t>(2 * local_chunks_), 0.0);
    side_sum_ = std::make_unique<distributed::ExactSum>(comm, std::vector<size_t>{0, 1}, 2, algorithm);
  }
  return gemm;
}

template <typename T>
void DeterministicStep<T>::describe(io::Json& run_record) const {
  run_record["deterministic"] = {{"chunks", chunks_},
                                 {"pass", full_.chunked() ? "chunked" : "chunk_by_chunk"}};
  // The most columns one product takes in the chunked pass (Note [deterministic mode's
  // library]), how a linear layer's weight gradients reach the grid (Note [the grid
  // product]), and the most columns one product of each kind takes: added after the
  // earlier keys, so that the record's text keeps its earlier prefix.
  if (full_.chunked()) {
    run_record["deterministic"]["product_columns"] = full_.widest();
    run_record["deterministic"]["weight_gradients"] = kernels::grid_product_serves<T>() ? "grid_product" : "library";
    run_record["deterministic"]["widths"] = {{"forward", full_.forward},
                                             {"input_gradient", full_.input_gradient}};
  }
}

template <typename T>
void DeterministicStep<T>::take_chunk(Index t, Index size, const Index* step_samples, Index at) {
  const Index world = parts_.comm.size(), rank = parts_.comm.rank();
  for (Index i = 0; i < size; ++i) {
    samples_[at + i] = step_samples[t + local_chunks_ * i];
    positions_[at + i] = world * t + rank + chunks_ * i;
  }
}

template <typename T>
double DeterministicStep<T>::compute_gradients(const Index* samples, Index count) {
  const Index size = count / local_chunks_;  // B/C, or fewer in the epoch's last step
  // Each chunk's backward adds its gradients straight into its term, not into the model's
  // buffer and then a copy: at mlp's 1.9 M parameters that copy was 15 MB of memory traffic
  // per chunk. The views go back to the buffer however the pass ends.
  struct ViewsBack {
    nn::Model<T>& model;
    ~ViewsBack() { model.bind_gradient_views(nullptr); }
  } views_back{model_};
  step_on_grid_ = chunked_pass(size);
  if (step_on_grid_) {
    pass_chunks_together(samples, size);
    const double vote = stop_vote();
    for (Index t = 0; t < local_chunks_; ++t) side_terms_[2 * t + 1] = t == 0 ? vote : 0.0;
  } else {
    for (Index t = 0; t < local_chunks_; ++t)
      std::fill_n(terms_.data() + static_cast<size_t>(t) * width_, parameters_, T(0));
    pass_chunk_by_chunk(samples, size);
    const T vote = static_cast<T>(stop_vote());
    for (Index t = 0; t < local_chunks_; ++t)
      terms_[static_cast<size_t>(t) * width_ + width_ - 1] = t == 0 ? vote : T(0);  // one vote per rank
  }
  return 0.0;
}

template <typename T>
void DeterministicStep<T>::pass_chunk_by_chunk(const Index* samples, Index size) {
  const Index p = parameters_;
  T* buffers = model_.buffer_values();
  int64_t* counters = model_.buffer_counters();
  for (Index i = 0; i < buffer_values_; ++i) saved_buffers_[i] = static_cast<double>(buffers[i]);
  std::copy(counters, counters + saved_counters_.size(), saved_counters_.begin());
  for (Index t = 0; t < local_chunks_; ++t) {
    // Every chunk starts from the step's buffers (Note [deterministic mode], 2).
    for (Index i = 0; i < buffer_values_; ++i) buffers[i] = static_cast<T>(saved_buffers_[i]);
    std::copy(saved_counters_.begin(), saved_counters_.end(), counters);
    take_chunk(t, size, samples, 0);
    T* term = terms_.data() + static_cast<size_t>(t) * width_;  // (width)
    model_.bind_gradient_views(term);
    pipeline_.phases().lap(&record::StepProfile::forward_s, record::SpanKind::kZeroGradients);
    nn::PassContext pass = pipeline_.training_pass();
    pass.positions = positions_.data();
    const double loss = pipeline_.forward_loss(samples_.data(), size, pass);
    pipeline_.backward(pass);
    term[p] = static_cast<T>(loss);  // rounded to T as the default mode's loss slot is
    std::copy(buffers, buffers + buffer_values_, term + p + 1);
  }
}

template <typename T>
void DeterministicStep<T>::pass_chunks_together(const Index* samples, Index size) {
  // Note [the chunked pass]: the L chunks side by side, one forward and one backward.
  for (Index t = 0; t < local_chunks_; ++t) take_chunk(t, size, samples, t * size);
  grid_->begin_step(model_.gradients());  // the views stay on the model's buffer
  pipeline_.phases().lap(&record::StepProfile::forward_s, record::SpanKind::kZeroGradients);
  nn::PassContext pass = pipeline_.training_pass();
  pass.positions = positions_.data();
  // Whole chunks, at most the columns the library was checked at (kernels/gemm_columns.hpp).
  ChunkGradientsOnGrid onto_grid(*grid_, size, pieces(size).forward, pieces(size).input_gradient);
  pass.parameter_gradients = &onto_grid;
  pipeline_.forward_loss(samples_.data(), local_chunks_ * size, pass, size, chunk_losses_.data());
  // Rounded to T as the default mode's loss slot is. The layers of this pass hold no buffers.
  for (Index t = 0; t < local_chunks_; ++t)
    side_terms_[2 * t] = static_cast<double>(static_cast<T>(chunk_losses_[t]));
  pipeline_.backward(pass);
}

template <typename T>
StepOutcome DeterministicStep<T>::reduce(double /*local_loss*/) {
  StepOutcome outcome = step_on_grid_ ? reduce_grid() : reduce_chunks();
  pipeline_.phases().lap(&record::StepProfile::sync_exposed_s, record::SpanKind::kReductionWait);
  // The mean loss, rounded to T as the loss slot holds it, and the gradients decide the step together.
  outcome.finite = mean_finite(static_cast<T>(outcome.loss));
  return outcome;
}

template <typename T>
void DeterministicStep<T>::keep_grid_mean(ChunkGradientGrid<T>& grid, double divisor) {
  grid.finish(divisor, model_.gradients(), parts_.reducer.algorithm());
}

template <typename T>
void DeterministicStep<T>::keep_chunk_mean(const std::vector<double>& mean) {
  T* grads = model_.gradients();
  for (Index i = 0; i < parameters_; ++i) grads[i] = static_cast<T>(mean[i]);
}

template <typename T>
bool DeterministicStep<T>::mean_finite(T loss) {
  T* grads = model_.gradients();
  grads[parameters_] = loss;  // the loss slot, as the default mode's
  return all_finite(grads, parameters_ + 1);
}

template <typename T>
StepOutcome DeterministicStep<T>::reduce_chunks() {
  const Index p = parameters_;
  // The mean over the C chunks: divided by C here and nowhere else (Note [deterministic mode], 3).
  step_sum_->sum(terms_.data(), local_chunks_, chunks_, static_cast<double>(chunks_), mean_.data());
  StepOutcome outcome;
  outcome.locally_finite = step_sum_->local_terms_finite();
  keep_chunk_mean(mean_);
  T* buffers = model_.buffer_values();
  for (Index i = 0; i < buffer_values_; ++i) buffers[i] = static_cast<T>(mean_[p + 1 + i]);
  outcome.stop_requested = mean_[width_ - 1] > 0.0;  // some rank voted: every rank stops
  outcome.loss = mean_[p];
  return outcome;
}

template <typename T>
StepOutcome DeterministicStep<T>::reduce_grid() {
  double side[2];  // the mean loss over the C chunks, the vote
  side_sum_->sum(side_terms_.data(), local_chunks_, chunks_, static_cast<double>(chunks_), side);
  keep_grid_mean(*grid_, static_cast<double>(chunks_));
  StepOutcome outcome;
  outcome.locally_finite = grid_->local_finite() && side_sum_->local_terms_finite();
  outcome.stop_requested = side[1] > 0.0;
  outcome.loss = side[0];
  return outcome;
}

template <typename T>
nn::EvalSums DeterministicStep<T>::evaluate(const data::Dataset<T>& set) {
  // Block g is samples [g E, (g + 1) E), E = B/C, on rank g mod N: fixed blocks, so each
  // block's forward pass and sums are the same at every N; the blocks' sums add exactly.
  distributed::Communicator& comm = parts_.comm;
  const Index n = set.samples, world = comm.size();
  const Index block = parts_.config.batch_global / chunks_;
  const Index blocks = (n + block - 1) / block;
  const Index mine = blocks / world + (comm.rank() < blocks % world ? 1 : 0);
  eval_terms_.resize(static_cast<size_t>(2 * mine));
  // In rounds of one block per rank: a rank without a block in the last round still takes part
  // in what the others' passes do collectively (evaluation_round_without_block).
  const Index rounds = (blocks + world - 1) / world;
  for (Index round = 0; round < rounds; ++round) {  // this rank's round-th block
    const Index g = round * world + comm.rank();
    if (g >= blocks) {
      evaluation_round_without_block();
      continue;
    }
    const Index first = g * block, count = std::min(block, n - first);
    for (Index i = 0; i < count; ++i) samples_[i] = first + i;
    nn::EvalSums sums;
    pipeline_.add_evaluation(set, samples_.data(), count, sums);
    eval_terms_[2 * round] = sums.loss_sum;
    eval_terms_[2 * round + 1] = sums.correct;
  }
  double totals[2];
  eval_sum_->sum(eval_terms_.data(), mine, blocks, static_cast<double>(n), totals);
  return {totals[0], totals[1]};
}

template class DeterministicStep<float>;
template class DeterministicStep<double>;

}  // namespace mpiddp::train
