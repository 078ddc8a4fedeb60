#pragma once
// The optimizer: an update rule (optim/update_rule.hpp: sgd, adam, adamw) over this rank's
// part of the parameters, with a sharding scope given to it: none (the whole on every
// rank), a node's ranks (ZeRO-1, reduce.shard_optimizer; Note [the optimizer sharded across a
// node] in src/optim/optimizer.cpp), or every rank of several nodes (Note [the optimizer
// sharded across the world]). The trainer steps it, checkpoints it and resynchronises it
// through this class alone, so that every scope shares one path. The sharding is the
// optimizer's own (ZeRO-1 is an optimizer concern): of the other ranks it needs only the parts
// and their exchange (distributed/part_exchange.hpp), never the communicator or the trainer;
// what a scope asks of the step is train/sharding_scope.hpp's.
#include <memory>
#include <vector>

#include "mpiddp/distributed/part_exchange.hpp"
#include "mpiddp/optim/update_rule.hpp"

namespace mpiddp::optim {

// Where part r of n parts of `count` elements begins: count cut into n runs of whole
// 64-byte lines (the last run shorter, trailing runs possibly empty), so that two ranks never
// write the same cache line. part_begin(count, n, n, ...) == count.
Index part_begin(Index count, int parts, int part, size_t element_bytes);

template <typename T>
class Optimizer {
 public:
  // This rank keeps the state of its part (exchange.part()) of the P parameters only: of its
  // node rank's part (kNode), of its world part (kWorld), or of the whole (kNone).
  // Local; validates config (optim::make_update_rule).
  Optimizer(const optim::OptimizerConfig& config, Index parameters,
            std::unique_ptr<distributed::PartExchange> exchange);

  // Among whom the state is cut: none, a node's ranks, or the world's (whose gradients need
  // be summed only into their owner's part: train/sharding_scope.hpp).
  distributed::ShardScope scope() const { return exchange_->scope(); }
  // How many parts the parameters are cut into, and whether this rank's is the last (the
  // one that the gradient buffer's reserved slots extend, across the world).
  int parts() const { return static_cast<int>(part_bytes_.size()) - 1; }
  bool holds_last_part() const { return part_ + 1 == parts(); }
  // (parts + 1) where each part begins, in parameters.
  std::vector<size_t> part_begins() const;
  // This rank's part [begin, end) of the parameters.
  Index begin() const { return begin_; }
  Index end() const { return end_; }

  // These parameters (of all P) take no weight decay: optimizer.decay "matrices".
  void exempt_from_decay(const ParameterRanges& ranges);

  // params, grads: (P), grads already averaged over ranks and equal on every rank (across
  // the world: this rank's part of them), read only. With optimizer.clip_grad_norm, the norm
  // of the gradients this rank holds sets clipping's coefficient, which the update applies as
  // it reads them (optim/gradient_clip.hpp). Updates this rank's part; sharded,
  // every rank of the node (across the world: of the world) then receives the others' parts.
  // Collective when sharded. Allocates nothing. Returns the gradient's norm before clipping,
  // or NaN when clipping is off.
  double step(T* params, const T* grads, double lr);
  // step, given this rank's part [begin(), end()) of the averaged gradient alone
  // (part_gradients: end() - begin() values), where the rank holds no other (reduce.shard
  // "gradients"): the optimizer must hold the gradient in parts (across the world) or whole.
  double step_on_part(T* params, const T* part_gradients, double lr);
  // step_on_part where the rank holds its part of the parameters alone too (reduce.shard
  // "parameters"): part_parameters are [begin(), end()), updated in place, and no part is
  // exchanged (the units gather them as they compute). Collective only for clipping's norm.
  double step_on_parameter_part(T* part_parameters, const T* part_gradients, double lr);

  // For a checkpoint: on rank 0, the state of all P parameters (the optimizer itself, or,
  // sharded, a temporary one that the parts of rank 0's node are gathered into); null on
  // the other ranks. Collective when sharded (rank 0's node; across the world, the world).
  // Keep it only while writing.
  std::shared_ptr<optim::UpdateRule<T>> whole_on_rank0();
  // From a checkpoint: fill(whole) restores the state of all P parameters into `whole`;
  // sharded, this rank then keeps its part. Local. Returns what fill returns.
  template <typename Fill>
  auto restore(Fill fill) {
    if (holds_whole()) return fill(*rule_);
    const auto whole = optim::make_update_rule<T>(config_, parameters_);
    auto result = fill(*whole);
    keep_part_of(*whole);
    return result;
  }
  // From a checkpoint in parts (checkpoint/checkpoint_parts.hpp): fill(local, begin())
  // restores the state this rank holds, that of its part [begin(), end()) alone, so that no
  // rank builds the whole. Local. Returns what fill returns.
  template <typename Fill>
  auto restore_part(Fill fill) {
    return fill(*rule_, begin_);
  }
  // ema.decay: puts the average of the weights in the parameters' place, all P of them on
  // every rank, as step() leaves updated parameters (this rank writes its part; sharded, the
  // parts are exchanged: a collective), keeping this rank's part of the parameters in `kept`
  // (end() - begin() values). restore_parameters puts them back (collective alike). Every
  // rank writes only its own part, so a parameter buffer that the node's ranks share is safe.
  void swap_in_average(T* params, T* kept);
  void restore_parameters(T* params, const T* kept);
  // The same where the rank holds its part of the parameters alone (reduce.shard "parameters"):
  // part_params are [begin(), end()); nothing is exchanged. Local.
  void swap_in_average_part(T* part_params, T* kept);
  void restore_parameter_part(T* part_params, const T* kept);
  // divergence.action = resync: every rank's state becomes rank 0's replica's. Collective.
  void broadcast_from_rank0();

  // The state this rank holds, over its part [begin(), end()): what a checkpoint in parts writes
  // of it (train/checkpointer.hpp), and for tests.
  optim::UpdateRule<T>& local() { return *rule_; }

 private:
  // step's work: the norm from `held` (the gradients of [held_begin_, held_end_)), the update
  // from `part` (those of [begin_, end_)).
  double update(T* params, const T* held, const T* part, double lr);
  // update's work on this rank's part alone: part_params are [begin_, end_); returns the norm.
  double update_part(T* part_params, const T* held, const T* part, double lr);
  // This rank's part is all P parameters (not sharded, or a part of one).
  bool holds_whole() const { return begin_ == 0 && end_ == parameters_; }
  void keep_part_of(optim::UpdateRule<T>& whole);

  optim::OptimizerConfig config_;
  Index parameters_;
  std::unique_ptr<distributed::PartExchange> exchange_;
  int part_ = 0;  // this rank's part
  Index begin_ = 0, end_ = 0;
  // The part [held_begin_, held_end_) of the averaged gradient this rank holds: its own part
  // when the world's parts hold the gradient in parts, else all P.
  Index held_begin_ = 0, held_end_ = 0;
  std::vector<size_t> part_bytes_;  // (parts + 1) where each part begins, in bytes
  std::unique_ptr<optim::UpdateRule<T>> rule_;  // over [begin_, end_): this rank's part
};

}  // namespace mpiddp::optim
