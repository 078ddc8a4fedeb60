// Deterministic mode: the same bits at every world size (config "deterministic",
// docs/design.md). The trainer calls these in place of compute_gradients, synchronize and
// evaluate when it is on; the default mode never comes here.
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
// chunk) and the parameter gradients (PassContext::chunk_columns: each chunk's products, of
// the same shapes as in its own pass, go onto the integer grid as they are made, Note
// [gradients onto the grid] in gradient_grid.cpp; a linear layer's weight gradient, where
// the build has AVX-512, by a kernel of ours that sums each chunk in registers, Note [the
// grid product] in src/nn/grid_product.cpp). So when every layer
// supports_chunked_pass(B/C) (for linear: B/C a whole number of Eigen's 4-column panels, and
// the product above Eigen's size for a coefficient-based one) and the library computing the
// products keeps a column's bits at every width the pass makes (Eigen does; another library
// is measured, Note [deterministic mode's library]), the rank runs one forward and one
// backward over its L chunks, with chunk t in columns [t B/C, (t+1) B/C), its products cut
// into pieces of at most PassContext::forward_columns and input_gradient_columns, and keeps
// no per-chunk copy of the gradients. Whether that holds depends on the config, B/C and the library on this machine,
// never on N, so every N takes the same path. A chunk's columns start
// at another offset at every N, so nothing in such a pass may round by address: Eigen's row
// sums did (they split rows between vector and scalar code by the address of the sum), and
// linear's bias gradient adds column after column instead. BatchNorm normalises over a
// chunk, and its statistics would need per-chunk groups: a model with it goes chunk by chunk.
#include <Eigen/Core>

#include <algorithm>
#include <stdexcept>

#include "mpiddp/core/threads.hpp"
#include "mpiddp/nn/layer.hpp"
#include "mpiddp/train/deterministic_config.hpp"
#include "mpiddp/train/deterministic_gemm.hpp"
#include "mpiddp/train/rank0_io.hpp"
#include "mpiddp/train/step_profile.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {

template <typename T>
void Trainer<T>::setup_deterministic() {
  auto d = std::make_unique<DeterministicStep<T>>();
  d->chunks = config_.deterministic.chunks;
  d->local_chunks = d->chunks / comm_.size();
  d->parameters = model_->parameter_count();
  d->buffer_values = model_->buffer_value_count();
  // A term: the gradients, the loss, the buffers and the stop vote (Note [stopping on a
  // signal]), which rides in the sum the step already makes, as in the default mode. Zeros
  // pad it to whole cache lines, so that every term's gradients lie as the model's own
  // buffer does: backward writes them in place (compute_chunk_gradients). A zero changes
  // neither its group's largest magnitude nor its sum.
  const Index used = d->parameters + 1 + d->buffer_values + 1;
  d->width = nn::scratch_values_bytes<T>(used) / sizeof(T);  // rounded up to 64 bytes
  d->saved_buffers.assign(static_cast<size_t>(d->buffer_values), 0.0);
  d->saved_counters.assign(static_cast<size_t>(model_->buffer_counter_count()), 0);
  const Index chunk = config_.batch_global / d->chunks;
  d->samples.assign(static_cast<size_t>(d->local_chunks * chunk), 0);
  d->positions.assign(static_cast<size_t>(d->local_chunks * chunk), 0);
  const Index per_epoch = train_.samples;
  const Index last = per_epoch % config_.batch_global;
  d->chunk = chunk;
  d->last_chunk = last > 0 ? last / d->chunks : chunk;  // the epoch's shorter last step's
  // One thread per rank, and Eigen's GEMM blocking fixed rather than read from this CPU's
  // caches: both decide the order of the products' additions (and so what the library
  // check in start_deterministic measures).
  threads_ = 1;
  use_threads(1);
  Eigen::setCpuCacheSizes(32 * 1024, 256 * 1024, 2 * 1024 * 1024);
  d->eval_sum = std::make_unique<distributed::ExactSum>(comm_, std::vector<size_t>{0, 1}, 2,
                                                        reducer_.algorithm());
  // The fewest samples a chunk holds: the epoch's last, shorter step has shorter chunks.
  model_->layers().check_training_batch(std::min(d->chunk, d->last_chunk));
  deterministic_ = std::move(d);
  // BatchNorm takes each chunk's own statistics, and its buffers are averaged exactly, so
  // they are neither reduced during the pass nor broadcast.
  training_pass_.statistics = nullptr;
  broadcast_buffers_each_step_ = false;
}

template <typename T>
void Trainer<T>::start_deterministic() {
  DeterministicStep<T>& d = *deterministic_;
  // The library and the pass: rank 0 decides, every rank takes its answer (Note
  // [deterministic mode's library]); rank 0's error (a library not built in) is every rank's.
  int64_t decision[5] = {0, 0, 0, 0, 0};  // the backend, the full step's pieces, the last step's
  on_rank0(comm_, [&] {
    DeterministicGemm chosen =
        choose_deterministic_gemm<T>(config_.gemm, *model_, d.chunks, d.chunk, d.last_chunk);
    gemm_ = std::move(chosen.choice);
    decision[0] = static_cast<int64_t>(gemm_.backend);
    decision[1] = chosen.full.forward;
    decision[2] = chosen.full.input_gradient;
    decision[3] = chosen.last.forward;
    decision[4] = chosen.last.input_gradient;
  });
  comm_.broadcast(decision, sizeof decision, 0);
  gemm_.backend = static_cast<nn::GemmBackend>(decision[0]);
  d.full = {decision[1], decision[2]};
  d.last = {decision[3], decision[4]};
  // The layers that take it hold no buffers: synchronize_grid sums none.
  if (d.any_chunked_pass() && model_->buffer_value_count() + model_->buffer_counter_count() > 0)
    throw std::logic_error("the chunked pass with a layer that holds buffers");
  // The terms, their mean and their sum (P int64) only for steps that go chunk by chunk:
  // L copies of the gradients.
  if (!d.every_step_chunked()) {
    d.terms.assign(static_cast<size_t>(d.local_chunks) * d.width, T(0));
    d.mean.assign(d.width, 0.0);
    // One grid per tensor, one for the loss, one for the buffers, one for the vote.
    std::vector<size_t> groups = model_->tensor_bounds();  // the tensors, then the loss at P
    if (d.buffer_values > 0) groups.push_back(static_cast<size_t>(d.parameters + 1));
    groups.push_back(d.width - 1);
    d.step_sum = std::make_unique<distributed::ExactSum>(comm_, std::move(groups), d.width,
                                                         reducer_.algorithm());
  }
  if (d.any_chunked_pass()) {
    // On the shm path the sums lie in the node's window, summed there without a copy.
    void* shared = reducer_.algorithm() == distributed::ReduceAlgorithm::kShm
                       ? comm_.allocate_shared_buffer(static_cast<size_t>(d.parameters) * sizeof(int64_t))
                       : nullptr;
    d.grid = std::make_unique<ChunkGradientGrid<T>>(comm_, model_->tensor_bounds(), d.chunks,
                                                    static_cast<int64_t*>(shared));
    d.side_terms.assign(static_cast<size_t>(2 * d.local_chunks), 0.0);
    d.side_sum = std::make_unique<distributed::ExactSum>(comm_, std::vector<size_t>{0, 1}, 2,
                                                         reducer_.algorithm());
  }
}

template <typename T>
double Trainer<T>::compute_chunk_gradients(const Index* samples, Index count) {
  DeterministicStep<T>& d = *deterministic_;
  const Index size = count / d.local_chunks;  // B/C, or fewer in the epoch's last step
  // Each chunk's backward adds its gradients straight into its term, not into the model's
  // buffer and then a copy: at mlp's 1.9 M parameters that copy was 15 MB of memory traffic
  // per chunk. The views go back to the buffer however the pass ends.
  struct ViewsBack {
    nn::Sequential<T>& model;
    ~ViewsBack() { model.bind_gradient_views(nullptr); }
  } views_back{*model_};
  d.step_on_grid = d.chunked_pass(size);
  if (d.step_on_grid) {
    pass_chunks_together(samples, size);
    for (Index t = 0; t < d.local_chunks; ++t) d.side_terms[2 * t + 1] = t == 0 ? stop_vote() : 0.0;
  } else {
    for (Index t = 0; t < d.local_chunks; ++t)
      std::fill_n(d.terms.data() + static_cast<size_t>(t) * d.width, d.parameters, T(0));
    pass_chunk_by_chunk(samples, size);
    for (Index t = 0; t < d.local_chunks; ++t)
      d.terms[static_cast<size_t>(t) * d.width + d.width - 1] = t == 0 ? stop_vote() : T(0);  // one vote per rank
  }
  return 0.0;  // the step's loss comes out of synchronize_chunks or synchronize_grid
}

template <typename T>
void Trainer<T>::pass_chunk_by_chunk(const Index* samples, Index size) {
  DeterministicStep<T>& d = *deterministic_;
  const Index local = d.local_chunks, p = d.parameters;
  const Index world = comm_.size(), rank = comm_.rank();
  T* buffers = model_->buffer_values();
  int64_t* counters = model_->buffer_counters();
  for (Index i = 0; i < d.buffer_values; ++i) d.saved_buffers[i] = static_cast<double>(buffers[i]);
  std::copy(counters, counters + d.saved_counters.size(), d.saved_counters.begin());
  const nn::BatchTargets<T> targets{batch_y_.data(), batch_labels_.data()};
  for (Index t = 0; t < local; ++t) {
    // Every chunk starts from the step's buffers (Note [deterministic mode], 2).
    for (Index i = 0; i < d.buffer_values; ++i) buffers[i] = static_cast<T>(d.saved_buffers[i]);
    std::copy(d.saved_counters.begin(), d.saved_counters.end(), counters);
    d.take_chunk(t, size, samples, world, rank, 0);
    T* term = d.terms.data() + static_cast<size_t>(t) * d.width;  // (width)
    model_->bind_gradient_views(term);
    phases_.lap(&StepProfile::forward_s, SpanKind::kZeroGradients);
    gather(train_, d.samples.data(), size);
    phases_.lap(&StepProfile::data_s, SpanKind::kData);
    ConstMatrixView<T> x(batch_x_.data(), train_.features, size);
    nn::PassContext pass = training_pass_;
    pass.positions = d.positions.data();
    const auto out = model_->forward(pass, x);
    const double loss = loss_->forward_backward(out, targets, model_->output_gradient());
    phases_.lap(&StepProfile::forward_s, SpanKind::kForward);
    model_->backward(pass, x);
    phases_.lap(&StepProfile::backward_s, SpanKind::kBackward);
    term[p] = static_cast<T>(loss);  // rounded to T as the default mode's loss slot is
    std::copy(buffers, buffers + d.buffer_values, term + p + 1);
  }
}

template <typename T>
void Trainer<T>::pass_chunks_together(const Index* samples, Index size) {
  // Note [the chunked pass]: the L chunks side by side, one forward and one backward.
  DeterministicStep<T>& d = *deterministic_;
  const Index local = d.local_chunks;
  const Index world = comm_.size(), rank = comm_.rank(), count = local * size;
  for (Index t = 0; t < local; ++t) d.take_chunk(t, size, samples, world, rank, t * size);
  d.grid->begin_step(model_->gradients());  // the views stay on the model's buffer
  phases_.lap(&StepProfile::forward_s, SpanKind::kZeroGradients);
  gather(train_, d.samples.data(), count);
  phases_.lap(&StepProfile::data_s, SpanKind::kData);
  ConstMatrixView<T> x(batch_x_.data(), train_.features, count);
  nn::PassContext pass = training_pass_;
  pass.positions = d.positions.data();
  pass.chunk_columns = size;
  pass.gradient_grid = d.grid.get();
  // Whole chunks, at most the columns the library was checked at (nn/gemm_columns.hpp).
  pass.forward_columns = d.pieces(size).forward;
  pass.input_gradient_columns = d.pieces(size).input_gradient;
  const auto out = model_->forward(pass, x);
  MatrixView<T> out_gradient = model_->output_gradient();
  const Index outputs = out.rows();
  for (Index t = 0; t < local; ++t) {
    const Index first = t * size;
    const nn::BatchTargets<T> targets{batch_y_.data() + first * train_.outputs,
                                      batch_labels_.data() + first};
    const double loss = loss_->forward_backward(
        ConstMatrixView<T>(out.data() + first * outputs, outputs, size), targets,
        MatrixView<T>(out_gradient.data() + first * outputs, outputs, size));
    // Rounded to T as the default mode's loss slot is. The layers of this pass hold no buffers.
    d.side_terms[2 * t] = static_cast<double>(static_cast<T>(loss));
  }
  phases_.lap(&StepProfile::forward_s, SpanKind::kForward);
  model_->backward(pass, x);
  phases_.lap(&StepProfile::backward_s, SpanKind::kBackward);
}

template <typename T>
double Trainer<T>::synchronize_chunks() {
  DeterministicStep<T>& d = *deterministic_;
  if (d.step_on_grid) return synchronize_grid();
  const Index p = d.parameters;
  // The mean over the C chunks: divided by C here and nowhere else (Note [deterministic mode], 3).
  d.step_sum->sum(d.terms.data(), d.local_chunks, d.chunks, static_cast<double>(d.chunks),
                  d.mean.data());
  locally_finite_ = d.step_sum->local_terms_finite();
  gradients_inspected_ = true;
  T* grads = model_->gradients();
  for (Index i = 0; i <= p; ++i) grads[i] = static_cast<T>(d.mean[i]);  // the loss slot too
  T* buffers = model_->buffer_values();
  for (Index i = 0; i < d.buffer_values; ++i) buffers[i] = static_cast<T>(d.mean[p + 1 + i]);
  stop_requested_ = d.mean[d.width - 1] > 0.0;  // some rank voted: every rank stops
  phases_.lap(&StepProfile::sync_exposed_s, SpanKind::kReductionWait);
  return d.mean[p];
}

template <typename T>
double Trainer<T>::synchronize_grid() {
  DeterministicStep<T>& d = *deterministic_;
  double side[2];  // the mean loss over the C chunks, the vote
  d.side_sum->sum(d.side_terms.data(), d.local_chunks, d.chunks, static_cast<double>(d.chunks), side);
  T* grads = model_->gradients();
  d.grid->finish(static_cast<double>(d.chunks), grads, reducer_.algorithm());
  grads[d.parameters] = static_cast<T>(side[0]);  // the loss slot, as synchronize_chunks fills it
  locally_finite_ = d.grid->local_finite() && d.side_sum->local_terms_finite();
  gradients_inspected_ = true;
  stop_requested_ = side[1] > 0.0;
  phases_.lap(&StepProfile::sync_exposed_s, SpanKind::kReductionWait);
  return side[0];
}

template <typename T>
nn::EvalSums Trainer<T>::evaluate_in_blocks(const data::Dataset<T>& set) {
  // Block g is samples [g E, (g + 1) E), E = B/C, on rank g mod N: fixed blocks, so each
  // block's forward pass and sums are the same at every N; the blocks' sums add exactly.
  DeterministicStep<T>& d = *deterministic_;
  const Index n = set.samples, world = comm_.size();
  const Index block = config_.batch_global / d.chunks;
  const Index blocks = (n + block - 1) / block;
  const Index mine = blocks / world + (comm_.rank() < blocks % world ? 1 : 0);
  d.eval_terms.resize(static_cast<size_t>(2 * mine));
  const nn::BatchTargets<T> targets{batch_y_.data(), batch_labels_.data()};
  Index k = 0;
  for (Index g = comm_.rank(); g < blocks; g += world, ++k) {
    const Index first = g * block, count = std::min(block, n - first);
    for (Index i = 0; i < count; ++i) d.samples[i] = first + i;
    gather(set, d.samples.data(), count);
    ConstMatrixView<T> x(batch_x_.data(), set.features, count);
    nn::EvalSums sums;
    loss_->accumulate(model_->forward(nn::evaluation_context(), x), targets, sums);
    d.eval_terms[2 * k] = sums.loss_sum;
    d.eval_terms[2 * k + 1] = sums.correct;
  }
  double totals[2];
  d.eval_sum->sum(d.eval_terms.data(), mine, blocks, static_cast<double>(n), totals);
  return {totals[0], totals[1]};
}

#define MPIDDP_INSTANTIATE(T)                                                    \
  template void Trainer<T>::setup_deterministic();                               \
  template void Trainer<T>::start_deterministic();                               \
  template double Trainer<T>::compute_chunk_gradients(const Index*, Index);      \
  template double Trainer<T>::synchronize_chunks();                              \
  template double Trainer<T>::synchronize_grid();                                \
  template nn::EvalSums Trainer<T>::evaluate_in_blocks(const data::Dataset<T>&);
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
