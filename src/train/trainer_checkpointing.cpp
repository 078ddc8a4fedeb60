// The trainer's persistence: where a run's parameters and optimizer state come from (a
// checkpoint, init.weights or the seed) and what it writes (checkpoints, final weights).
// Kept apart from trainer.cpp so the training loop holds only the calls.
#include <chrono>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/train/rank0_io.hpp"
#include "mpiddp/train/trainer.hpp"
#include "mpiddp/train/weights.hpp"

namespace mpiddp::train {

template <typename T>
RunIdentity Trainer<T>::identity() const {
  RunIdentity id;
  id.model = model_->describe();
  id.dtype = config_.dtype;
  id.config = resume_config(config_);
  id.global_batch = batch_per_rank_ * comm_.size();
  id.train_samples = train_.samples;
  id.steps_per_epoch = (sampler_.per_rank() + batch_per_rank_ - 1) / batch_per_rank_;
  id.world_size = comm_.size();
  return id;
}

template <typename T>
TrainingPosition Trainer<T>::initial_state() {
  if (!options_.resume.empty()) {
    // Rank 0 finds and reads the checkpoint; every rank validates the same bytes and
    // restores from them, so the replicas start identical.
    std::vector<char> path_bytes = bytes_from_rank0(comm_, [&] {
      const std::string path = resolve_resume_path(options_.resume, config_.checkpoint.dir);
      return std::vector<char>(path.begin(), path.end());
    });
    resumed_from_.assign(path_bytes.begin(), path_bytes.end());
    std::vector<char> bytes = bytes_from_rank0(
        comm_, [&] { return io::read_whole_file(resumed_from_, kExitCheckpoint, "--resume"); });
    const TrainingPosition position = collectively([&] {
      const io::SafetensorsFile file(std::move(bytes), resumed_from_, kExitCheckpoint);
      return restore_checkpoint(file, identity(), *model_, *optimizer_);
    });
    if (position.epoch > config_.epochs)
      throw ConfigError("epochs", "the checkpoint '" + resumed_from_ + "' has completed " +
                                      std::to_string(position.epoch - 1) + " epochs; set epochs "
                                      "above that to train on (--set epochs=N)");
    return position;
  }
  if (!config_.init_weights.empty()) {
    on_rank0(comm_, [&] { load_weights(config_.init_weights, *model_); });
  } else {
    model_->initialize(config_.seed);
  }
  return TrainingPosition{};
}

template <typename T>
void Trainer<T>::save_checkpoint(const TrainingPosition& position) {
  if (comm_.rank() != 0) return;  // rank 0 owns checkpoints; the replicas are identical
  const auto start = std::chrono::steady_clock::now();
  const std::string path =
      write_checkpoint(config_.checkpoint, position, identity(), *model_, *optimizer_);
  if (traced_) traced_->add(SpanKind::kCheckpoint, start, std::chrono::steady_clock::now());
  log_->write({{"kind", "checkpoint"}, {"path", path}, {"epoch", position.epoch},
               {"batch", position.batch}, {"step", position.step}});
}

template <typename T>
void Trainer<T>::save_final_weights() {
  if (comm_.rank() == 0 && !config_.save_weights.empty())
    save_weights(config_.save_weights, *model_);
}

template <typename T>
const std::vector<Index>* Trainer<T>::replay_order(int64_t epoch) const {
  return order_ ? &order_->epoch(epoch) : nullptr;
}

#define MPIDDP_INSTANTIATE(T)                                                    \
  template RunIdentity Trainer<T>::identity() const;                             \
  template TrainingPosition Trainer<T>::initial_state();                         \
  template void Trainer<T>::save_checkpoint(const TrainingPosition&);            \
  template void Trainer<T>::save_final_weights();                                \
  template const std::vector<Index>* Trainer<T>::replay_order(int64_t) const;
MPIDDP_INSTANTIATE(float)
MPIDDP_INSTANTIATE(double)
#undef MPIDDP_INSTANTIATE

}  // namespace mpiddp::train
