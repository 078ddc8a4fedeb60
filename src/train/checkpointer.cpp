// The trainer's persistence (include/mpiddp/train/checkpointer.hpp): where a run's parameters
// and optimizer state come from, and what it writes.
#include "mpiddp/train/checkpointer.hpp"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <filesystem>
#include <system_error>
#include <utility>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/distributed/rank0_io.hpp"
#include "mpiddp/checkpoint/checkpoint_parts.hpp"
#include "mpiddp/checkpoint/vocabulary.hpp"
#include "mpiddp/checkpoint/weights.hpp"
#include "mpiddp/train/fault_injection.hpp"

namespace mpiddp::train {

template <typename T>
Checkpointer<T>::Checkpointer(const config::Config& config, distributed::Communicator& comm, nn::Model<T>& model,
                              optim::Optimizer<T>& optimizer, record::StepObserver& observer,
                              record::RunLogWriter& log, checkpoint::RunIdentity identity)
    : config_(config),
      comm_(comm),
      model_(model),
      optimizer_(optimizer),
      observer_(observer),
      log_(log),
      identity_(std::move(identity)) {}

template <typename T>
checkpoint::TrainingPosition Checkpointer<T>::initial_state(const std::string& resume) {
  // A run killed while writing a checkpoint leaves its temporary file; nothing else will.
  if (comm_.rank() == 0 && !config_.checkpoint.dir.empty()) {
    const auto stale = checkpoint::remove_stale_temporaries(config_.checkpoint.dir);
    std::string names;
    for (const auto& name : stale) names += (names.empty() ? "" : ", ") + name;
    if (!stale.empty())
      std::fprintf(stderr, "mpiddp: removed %zu stale temporary file%s of an interrupted "
                           "checkpoint write from '%s': %s\n",
                   stale.size(), stale.size() == 1 ? "" : "s", config_.checkpoint.dir.c_str(),
                   names.c_str());
  }
  if (!resume.empty()) {
    // Rank 0 finds the checkpoint (restore_file, restore_parts: and how it is read).
    std::vector<char> path_bytes = distributed::bytes_from_rank0(comm_, [&] {
      const std::string path = checkpoint::resolve_resume_path(resume, config_.checkpoint.dir);
      return std::vector<char>(path.begin(), path.end());
    });
    resumed_from_.assign(path_bytes.begin(), path_bytes.end());
  }
  if (!resumed_from_.empty()) {  // empty for --resume auto without a checkpoint yet
    const bool in_parts = distributed::bytes_from_rank0(comm_, [&] {
                            return std::vector<char>{checkpoint::is_parts_checkpoint(resumed_from_) ? '1' : '0'};
                          })[0] == '1';
    const checkpoint::TrainingPosition position = in_parts ? restore_parts() : restore_file();
    // A launcher's restart (--resume auto) may find the checkpoint of a run that had already
    // finished training when it died (say, while saving its weights): the run then only
    // finishes (replica check, weights, end record). Asked for explicitly, it is a mistake.
    const bool finished = resume == "auto" && position.epoch == config_.epochs + 1;
    if (position.epoch > config_.epochs && !finished)
      throw ConfigError("epochs", "the checkpoint '" + resumed_from_ + "' has completed " +
                                      std::to_string(position.epoch - 1) + " epochs; set epochs "
                                      "above that to train on (--set epochs=N)");
    return position;
  }
  if (!config_.init_weights.empty()) {
    // Rank 0 reads them, and the start gives them to every rank; a model holding its part of
    // the parameters alone (reduce.shard "parameters") reads its part itself, on every rank.
    const auto load = [&] { checkpoint::load_weights(config_.init_weights, model_); };
    if (model_.holds_all_parameters()) distributed::on_rank0(comm_, load);
    else distributed::on_every_rank(comm_, load);
  } else {
    model_.initialize(config_.seed);
  }
  return checkpoint::TrainingPosition{};
}

template <typename T>
checkpoint::TrainingPosition Checkpointer<T>::restore_file() {
  // A model holding its part of the parameters alone (reduce.shard "parameters") has no
  // replicas: every rank maps the file and reads its slices of the parameters and of the
  // optimizer's state (the model's part is the optimizer's), never the whole model, so the
  // file must be where every rank sees it, as parts are.
  if (!model_.holds_all_parameters())
    return distributed::collectively([&] {
      const io::SafetensorsFile file = io::map_safetensors(resumed_from_, kExitCheckpoint, "--resume");
      return optimizer_.restore_part([&](optim::UpdateRule<T>& local, Index local_begin) {
        return checkpoint::restore_checkpoint(file, identity_, model_, local, local_begin);
      });
    });
  // Rank 0 reads the checkpoint; every rank validates the same bytes and restores from them,
  // so the replicas start identical.
  std::vector<char> bytes = distributed::bytes_from_rank0(
      comm_, [&] { return io::read_whole_file(resumed_from_, kExitCheckpoint, "--resume"); });
  return distributed::collectively([&] {
    const io::SafetensorsFile file(std::move(bytes), resumed_from_, kExitCheckpoint);
    return optimizer_.restore([&](optim::UpdateRule<T>& whole) {
      return checkpoint::restore_checkpoint(file, identity_, model_, whole);
    });
  });
}

template <typename T>
checkpoint::TrainingPosition Checkpointer<T>::restore_parts() {
  // Rank 0 reads the index; every rank reads from the parts what it holds (all the parameters,
  // its part of the optimizer state), so the part files must be where every rank sees them.
  const std::vector<char> index = distributed::bytes_from_rank0(comm_, [&] {
    return io::read_whole_file(checkpoint::parts_index_path(resumed_from_), kExitCheckpoint, "--resume");
  });
  checkpoint::TrainingPosition position;
  distributed::on_every_rank(comm_, [&] {
    checkpoint::PartsCheckpoint parts(resumed_from_, index);
    position = optimizer_.restore_part([&](optim::UpdateRule<T>& local, Index local_begin) {
      return checkpoint::restore_parts(parts, identity_, model_, local, local_begin);
    });
  });
  return position;
}

template <typename T>
std::string Checkpointer<T>::series_path(int64_t step) const {
  return in_parts() ? checkpoint::parts_checkpoint_path(config_.checkpoint.dir, step)
                    : checkpoint::checkpoint_path(config_.checkpoint.dir, step);
}

template <typename T>
bool Checkpointer<T>::in_parts() const {
  return config_.checkpoint.format == "parts";
}

template <typename T>
void Checkpointer<T>::save(const checkpoint::TrainingPosition& position, const std::optional<io::Json>& best) {
  if (!best) last_checkpoint_step_ = position.step;  // on every rank: save_at_interrupt reads it
  const auto start = std::chrono::steady_clock::now();
  if (in_parts()) return write_parts(position, start, best);
  // Sharded, the parts of the optimizer's state come to rank 0 first (a collective).
  const auto optimizer = optimizer_.whole_on_rank0();
  if (comm_.rank() != 0) return;  // rank 0 owns checkpoints; the replicas are identical
  write_file(position, *optimizer, start, best);
}

template <typename T>
void Checkpointer<T>::save_at_interrupt(const checkpoint::TrainingPosition& position) {
  const bool due = !config_.checkpoint.dir.empty() && last_checkpoint_step_ != position.step;  // alike on every rank
  if (in_parts()) {  // every rank writes its part; the outcomes are shared
    if (due) write_parts(position, std::chrono::steady_clock::now(), std::nullopt);
    return;
  }
  // Sharded, the optimizer's parts come to rank 0 first: a collective, before rank 0 alone.
  const auto optimizer = due ? optimizer_.whole_on_rank0() : nullptr;
  const auto start = std::chrono::steady_clock::now();
  // Rank 0 writes; its outcome is every rank's, so that exit code 9 means "saved" everywhere.
  distributed::on_rank0(comm_, [&] {
    if (due) write_file(position, *optimizer, start, std::nullopt);
  });
}

template <typename T>
void Checkpointer<T>::write_file(const checkpoint::TrainingPosition& position, optim::UpdateRule<T>& whole,
                                 std::chrono::steady_clock::time_point start, const std::optional<io::Json>& best) {
  const checkpoint::WriteProbes probes =
      checkpoint_write_probes(config_.faults.inject, position.step, best.has_value());
  const std::string path =
      best ? checkpoint::write_best_checkpoint(config_.checkpoint, position, identity_, model_, whole, probes)
           : checkpoint::write_checkpoint(config_.checkpoint, position, identity_, model_, whole, probes);
  record_written(path, position, start, best);
}

template <typename T>
void Checkpointer<T>::write_parts(const checkpoint::TrainingPosition& position,
                                  std::chrono::steady_clock::time_point start, const std::optional<io::Json>& best) {
  const std::string& dir = config_.checkpoint.dir;
  const std::string path = best ? checkpoint::best_parts_path(dir) : series_path(position.step);
  const checkpoint::WriteProbes probes = checkpoint_write_probes(config_.faults.inject, position.step, best.has_value());
  distributed::on_rank0(comm_, [&] {
    std::error_code error;
    std::filesystem::create_directories(path, error);
    if (error) throw Error(kExitOutput, "checkpoint.dir: '" + path + "' cannot be created: " + error.message());
  });
  // Each rank writes the part of the state it holds (sharded: its optimizer part; unsharded:
  // the world's even cut of the parameters), and a part that several ranks hold (a node's
  // parts, held again on every node) is written once, by the lowest of them. Rank 0 always
  // writes one: the model's buffers go with it.
  const std::pair<Index, Index> range = part_range();
  const std::vector<uint64_t> begins = comm_.allgather(static_cast<uint64_t>(range.first));
  const std::vector<uint64_t> ends = comm_.allgather(static_cast<uint64_t>(range.second));
  int parts = 0, mine = -1;
  for (size_t r = 0; r < begins.size(); ++r) {
    bool writes = r == 0 || begins[r] < ends[r];
    for (size_t q = 0; q < r && writes; ++q) writes = begins[q] != begins[r] || ends[q] != ends[r];
    if (!writes) continue;
    if (static_cast<int>(r) == comm_.rank()) mine = parts;
    ++parts;
  }
  // A number drawn by rank 0 for this write makes its id unique (Note [checkpoints in parts]).
  const std::vector<char> drawn = distributed::bytes_from_rank0(comm_, [] {
    const uint64_t nonce = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    return std::vector<char>(reinterpret_cast<const char*>(&nonce), reinterpret_cast<const char*>(&nonce) + 8);
  });
  uint64_t nonce = 0;
  std::memcpy(&nonce, drawn.data(), sizeof nonce);
  const std::string id = checkpoint::parts_write_id(identity_, path, position.step, nonce);
  std::string described;
  distributed::on_every_rank(comm_, [&] {
    if (mine < 0) return;
    const checkpoint::PartToWrite part{path, id, mine, parts, range.first, range.second, comm_.rank() == 0};
    described = checkpoint::write_part(part, model_, optimizer_.local(), optimizer_.begin()).dump();
  });
  const std::vector<std::string> descriptions = comm_.allgather_string(described);
  // The index makes the parts a checkpoint: rank 0's outcome is every rank's.
  distributed::on_rank0(comm_, [&] {
    std::vector<io::Json> written;
    for (const auto& d : descriptions)
      if (!d.empty()) written.push_back(io::Json::parse(d));
    checkpoint::write_parts_index(path, id, position, identity_, model_, optimizer_.local(), written,
                                  probes.before_rename);
    if (best) {
      checkpoint::remove_checkpoint(checkpoint::best_checkpoint_path(dir));  // a best file of checkpoint.format "file"
    } else {
      if (probes.before_pruning) probes.before_pruning();
      checkpoint::prune_checkpoints(config_.checkpoint);
    }
  });
  record_written(path, position, start, best);
}

template <typename T>
std::pair<Index, Index> Checkpointer<T>::part_range() const {
  if (optimizer_.scope() != distributed::ShardScope::kNone) return {optimizer_.begin(), optimizer_.end()};
  const Index count = model_.parameter_count();
  return {optim::part_begin(count, comm_.size(), comm_.rank(), sizeof(T)),
          optim::part_begin(count, comm_.size(), comm_.rank() + 1, sizeof(T))};
}

template <typename T>
void Checkpointer<T>::record_written(const std::string& path, const checkpoint::TrainingPosition& position,
                                     std::chrono::steady_clock::time_point start, const std::optional<io::Json>& best) {
  if (record::StepTrace* traced = observer_.traced()) traced->add(record::SpanKind::kCheckpoint, start, std::chrono::steady_clock::now());
  io::Json record = {{"kind", "checkpoint"}, {"path", path}, {"epoch", position.epoch},
                     {"batch", position.batch}, {"step", position.step}};
  if (best) record["best"] = *best;
  log_.write(record);  // rank 0's log; a disabled writer elsewhere
}

template <typename T>
void Checkpointer<T>::save_final_weights() {
  if (config_.save_weights.empty()) return;
  const auto metadata = checkpoint::model_metadata(identity_.vocabulary, config_.resolved.dump());
  if (comm_.rank() == 0) checkpoint::save_weights(config_.save_weights, model_, metadata);
  if (config_.optimizer.ema_decay <= 0.0) return;
  // The average of the weights beside them, under the same names: optimizer state, gathered
  // from the ranks' parts to rank 0 when the optimizer is sharded (a collective).
  const auto whole = optimizer_.whole_on_rank0();
  if (comm_.rank() == 0)
    checkpoint::save_weights(checkpoint::average_weights_path(config_.save_weights), model_, metadata,
                             whole->average()->data());
}

template class Checkpointer<float>;
template class Checkpointer<double>;

}  // namespace mpiddp::train
