#include "mpiddp/optim/optimizer.hpp"

#include <algorithm>
#include <cassert>
#include <utility>
#include <cstring>
#include <limits>

#include "mpiddp/optim/gradient_clip.hpp"

namespace mpiddp::optim {

// Note [the optimizer sharded across a node]: after the reduction every rank holds the same
// averaged gradients, and every optimizer here is elementwise: parameter i's update reads
// only p[i], g[i] and its own state at i (the step count and the bias corrections are the
// same scalars everywhere). So node rank s may update part s alone, holding the state of
// part s alone, and get the bits the whole-buffer update gives there. The node's ranks then
// exchange the updated parts (an allgather inside the node), and every rank again holds
// every parameter: forward, backward, the replica check and the final weights see what they
// saw before. Every node cuts the buffer the same way and has the same gradients, so the
// ranks of equal node rank compute equal parts with nothing sent between the nodes.
// Per rank, the optimizer's state and its time are divided by the ranks on the node.
// A checkpoint still holds the whole state (gathered on rank 0), so it resumes at any
// world size, sharded or not.
//
// Note [the optimizer sharded across the leaders]: with one rank per node there is no node
// to share the work with, and every rank is its node's leader. Then the parts are the
// world's: rank r owns part r, the gradients' sum is a reduce-scatter (each rank receives
// its own part summed, Note [the scattered sum] in src/distributed/mpi_scattered_sum.cpp)
// and the updated parts meet again in an allgather. The bytes between the nodes are those
// of one allreduce done well, the optimizer's time and state are divided by the world
// size, and each part is computed once, so every rank gets the same bits. Only the owner of
// a part holds its state, so a resync has no state to copy: the state is one, cut in parts.
//
// Note [the optimizer sharded across the world]: the same with several ranks on each node,
// on the shm path, where the node's gradients and its one copy of the parameters lie in
// shared memory. Node rank s on node n owns world part s * nodes + n, so node rank s's parts
// on all the nodes form one run of the buffer. Rank s sums the node's gradients over its
// run, the ranks of node rank s reduce-scatter the run among the nodes (Note [the scattered
// sum on a node] in src/distributed/mpi_node_scattered_sum.cpp), each updates its part in
// its node's copy, and they allgather the run among the nodes into every node's copy: the
// nodes' exchange is a reduce-scatter and an allgather, and the optimizer's state and time
// per rank are divided by the world size, not by the ranks of a node. bf16 between the
// nodes has no scattered form: a compressed run shards across the node.

Index part_begin(Index count, int parts, int part, size_t element_bytes) {
  constexpr Index kLineBytes = 64;
  const Index line = std::max<Index>(1, kLineBytes / static_cast<Index>(element_bytes));
  const Index per = ((count + parts - 1) / parts + line - 1) / line * line;
  return std::min(count, per * part);
}

template <typename T>
Optimizer<T>::Optimizer(const optim::OptimizerConfig& config, Index parameters,
                                  std::unique_ptr<distributed::PartExchange> exchange)
    : config_(config), parameters_(parameters), exchange_(std::move(exchange)) {
  const int parts = exchange_->parts();
  part_ = exchange_->part();
  for (int r = 0; r <= parts; ++r)
    part_bytes_.push_back(static_cast<size_t>(part_begin(parameters, parts, r, sizeof(T))) *
                          sizeof(T));
  begin_ = part_begin(parameters, parts, part_, sizeof(T));
  end_ = part_begin(parameters, parts, part_ + 1, sizeof(T));
  const bool gradient_in_parts = exchange_->scope() == distributed::ShardScope::kWorld;
  held_begin_ = gradient_in_parts ? begin_ : 0;
  held_end_ = gradient_in_parts ? end_ : parameters;
  rule_ = optim::make_update_rule<T>(config, end_ - begin_);
}

template <typename T>
void Optimizer<T>::exempt_from_decay(const ParameterRanges& ranges) {
  ParameterRanges mine;
  for (const auto& [begin, end] : ranges)
    if (begin < end_ && end > begin_) mine.emplace_back(std::max(begin, begin_) - begin_, std::min(end, end_) - begin_);
  rule_->exempt_from_decay(mine);
}

template <typename T>
double Optimizer<T>::step(T* params, const T* grads, double lr) {
  return update(params, grads + held_begin_, grads + begin_, lr);
}

template <typename T>
double Optimizer<T>::step_on_part(T* params, const T* part_gradients, double lr) {
  assert(held_begin_ == begin_ && held_end_ == end_);
  return update(params, part_gradients, part_gradients, lr);
}

template <typename T>
double Optimizer<T>::step_on_parameter_part(T* part_parameters, const T* part_gradients, double lr) {
  assert(held_begin_ == begin_ && held_end_ == end_);
  return update_part(part_parameters, part_gradients, part_gradients, lr);
}

template <typename T>
double Optimizer<T>::update(T* params, const T* held, const T* part, double lr) {
  const double norm = update_part(params + begin_, held, part, lr);
  exchange_->allgather(params, part_bytes_);  // sharded: every rank again holds all P
  return norm;
}

template <typename T>
double Optimizer<T>::update_part(T* part_params, const T* held, const T* part, double lr) {
  double norm = std::numeric_limits<double>::quiet_NaN();
  T gradient_scale = T(1);
  if (config_.clip_grad_norm > 0.0) {
    norm = gradient_norm(held, held_end_ - held_begin_, parameters_, *exchange_);
    gradient_scale = optim::clip_coefficient<T>(norm, config_.clip_grad_norm);
  }
  rule_->step(part_params, part, lr, gradient_scale);
  return norm;
}

template <typename T>
void Optimizer<T>::swap_in_average(T* params, T* kept) {
  swap_in_average_part(params + begin_, kept);
  exchange_->allgather(params, part_bytes_);
}

template <typename T>
void Optimizer<T>::restore_parameters(T* params, const T* kept) {
  restore_parameter_part(params + begin_, kept);
  exchange_->allgather(params, part_bytes_);
}

template <typename T>
void Optimizer<T>::swap_in_average_part(T* part_params, T* kept) {
  if (end_ == begin_) return;  // an empty part: its rule holds no average
  const std::vector<T>& average = *rule_->average();
  std::copy(part_params, part_params + (end_ - begin_), kept);
  std::copy(average.begin(), average.end(), part_params);
}

template <typename T>
void Optimizer<T>::restore_parameter_part(T* part_params, const T* kept) {
  std::copy(kept, kept + (end_ - begin_), part_params);
}

template <typename T>
std::vector<size_t> Optimizer<T>::part_begins() const {
  std::vector<size_t> begins;
  for (const size_t bytes : part_bytes_) begins.push_back(bytes / sizeof(T));
  return begins;
}

template <typename T>
std::shared_ptr<optim::UpdateRule<T>> Optimizer<T>::whole_on_rank0() {
  if (holds_whole()) {
    if (!exchange_->is_rank0()) return nullptr;
    // Not owned: the optimizer is already whole.
    return std::shared_ptr<optim::UpdateRule<T>>(rule_.get(), [](optim::UpdateRule<T>*) {});
  }
  std::shared_ptr<optim::UpdateRule<T>> whole;
  if (exchange_->is_rank0()) whole = optim::make_update_rule<T>(config_, parameters_);
  auto mine = rule_->state_buffers();
  for (size_t b = 0; b < mine.size(); ++b) {
    T* into = whole ? whole->state_buffers()[b].values->data() : nullptr;
    exchange_->gather_to_rank0(mine[b].values->data(), into, part_bytes_);
  }
  if (whole) whole->set_steps(rule_->steps());
  return whole;
}

template <typename T>
void Optimizer<T>::keep_part_of(optim::UpdateRule<T>& whole) {
  auto from = whole.state_buffers();
  auto into = rule_->state_buffers();
  for (size_t b = 0; b < into.size(); ++b)
    std::copy(from[b].values->begin() + begin_, from[b].values->begin() + end_,
              into[b].values->begin());
  rule_->set_steps(whole.steps());
}

template <typename T>
void Optimizer<T>::broadcast_from_rank0() {
  for (auto& state : rule_->state_buffers())
    exchange_->copy_state_from_rank0(state.values->data(), state.values->size() * sizeof(T));
}

template class Optimizer<float>;
template class Optimizer<double>;

}  // namespace mpiddp::optim
