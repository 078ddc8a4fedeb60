#include "mpiddp/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/finite.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/data/source.hpp"
#include "mpiddp/optim/schedule.hpp"
#include "mpiddp/train/fault_injection.hpp"
#include "mpiddp/train/progress.hpp"

namespace mpiddp::train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <typename T>
void check_data_fits(const Config& c, const data::Dataset<T>& set, const std::string& key,
                     Index inputs, Index outputs) {
  if (set.features != inputs)
    throw ConfigError(key, "has " + std::to_string(set.features) + " features but model.inputs is " +
                               std::to_string(inputs));
  if (c.loss == "cross_entropy") {
    if (!set.is_classification())
      throw ConfigError("loss", "cross_entropy needs class labels, but " + key + " (" + set.name +
                                    ") is a regression dataset; use \"mse\"");
    if (set.classes != outputs)
      throw ConfigError("model.layers", "the last layer has " + std::to_string(outputs) +
                                            " outputs but " + key + " has " +
                                            std::to_string(set.classes) + " classes");
  } else {
    if (set.is_classification())
      throw ConfigError("loss", "mse needs regression targets, but " + key + " (" + set.name +
                                    ") has class labels; use \"cross_entropy\"");
    if (set.outputs != outputs)
      throw ConfigError("model.layers", "the last layer has " + std::to_string(outputs) +
                                            " outputs but " + key + " has " +
                                            std::to_string(set.outputs) + " targets per sample");
  }
}

}  // namespace

template <typename T>
Trainer<T>::Trainer(const Config& config, dist::Communicator& comm, TrainOptions options)
    : config_(config), comm_(comm), options_(options),
      train_(data::load_source<T>(config.train_data, config.seed, "train")),
      reducer_(comm, config.reduce),
      sampler_(train_.samples, comm.rank(), comm.size(), config.shuffle, config.drop_last,
               config.seed),
      batch_per_rank_(config.per_rank_batch(comm.size())) {
  if (batch_per_rank_ % config.accumulate_steps != 0)
    throw ConfigError("accumulate_steps", "accumulate_steps " +
                                              std::to_string(config.accumulate_steps) +
                                              " does not divide the per-rank batch " +
                                              std::to_string(batch_per_rank_));
  if (config.eval_data) eval_ = data::load_source<T>(*config.eval_data, config.seed, "eval");
  const nn::Shape input_shape = model_input_shape(config, train_.shape, train_.features, "data.train");
  const Index inputs = nn::shape_size(input_shape);
  // One extra gradient slot carries the loss: Note [the loss rides with the gradients].
  model_ = std::make_unique<nn::Sequential<T>>(input_shape, config.layers, batch_per_rank_, 1);
  plan_reduction(reducer_, *model_);
  // One step: forward plus backward, about 3 multiply-adds per weight per sample.
  const double step_work = 3.0 * model_->multiply_adds_per_sample() * static_cast<double>(batch_per_rank_);
  threads_ = choose_threads(config.threads, std::getenv("OMP_NUM_THREADS"), affinity_cores(),
                            node_cores(), comm.ranks_on_node(), step_work)
                 .threads;
  use_threads(threads_);
  ready_forwarder_.reducer = &reducer_;
  check_data_fits(config, train_, "data.train", inputs, model_->outputs());
  if (eval_) check_data_fits(config, *eval_, "data.eval", inputs, model_->outputs());
  if (sampler_.per_rank() == 0)
    throw ConfigError("data.train.samples", "fewer samples than ranks with drop_last: every "
                                            "rank would get an empty epoch");
  loss_ = nn::make_loss<T>(config.loss);
  optimizer_ = optim::make_optimizer<T>(config.optimizer, model_->parameter_count());
  // Only rank 0 writes the log; the other ranks hold a disabled one.
  log_ = comm.rank() == 0 && !config.log_path.empty()
             ? std::make_unique<io::JsonlLog>(config.log_path)
             : std::make_unique<io::JsonlLog>();
  batch_x_.assign(inputs * batch_per_rank_, T(0));
  batch_y_.assign(std::max<Index>(train_.outputs, eval_ ? eval_->outputs : 0) * batch_per_rank_, T(0));
  batch_labels_.assign(batch_per_rank_, 0);
  // Rank 0's parameters arrive for the replica check in pieces of at most 1 Mi values: a
  // second copy of a big model would count against every rank's memory.
  replica_scratch_.assign(std::min<Index>(model_->parameter_count(), Index{1} << 20), T(0));
  inject_setup_fault(config.faults.inject, comm.rank());
}

template <typename T>
void Trainer<T>::gather(const data::Dataset<T>& set, const Index* samples, Index count) {
  const auto x_bytes = static_cast<size_t>(set.features) * sizeof(T);
  for (Index j = 0; j < count; ++j) {
    const Index i = samples[j];
    std::memcpy(batch_x_.data() + j * set.features, set.x + i * set.features, x_bytes);
    if (set.is_classification()) {
      batch_labels_[j] = set.labels[i];
    } else {
      std::memcpy(batch_y_.data() + j * set.outputs, set.y + i * set.outputs,
                  static_cast<size_t>(set.outputs) * sizeof(T));
    }
  }
}

template <typename T>
double Trainer<T>::compute_gradients(const Index* samples, Index count, bool start_sync) {
  PhaseClock clock(options_.profile);
  model_->zero_gradients();
  clock.lap(&StepProfile::forward_s);  // clearing the gradients counts as forward work
  // Micro-batch m has count/K samples (the first count % K one more). Each one's loss is
  // its own mean; weighting its output gradient by size/count makes the K gradients add up
  // to the gradient of the mean over all count samples, as one batch would give.
  const Index micro_batches = std::min<Index>(config_.accumulate_steps, count);
  const Index base = count / micro_batches, extra = count % micro_batches;
  const nn::BatchTargets<T> targets{batch_y_.data(), batch_labels_.data()};
  double loss = 0.0;
  Index first = 0;
  for (Index m = 0; m < micro_batches; ++m) {
    const Index size = base + (m < extra ? 1 : 0);
    gather(train_, samples + first, size);
    clock.lap(&StepProfile::data_s);
    ConstMatrixView<T> x(batch_x_.data(), train_.features, size);
    const auto out = model_->forward(x);
    const double micro_loss = loss_->forward_backward(out, targets, model_->output_gradient());
    if (micro_batches == 1) {
      loss = micro_loss;
    } else {
      const double weight = static_cast<double>(size) / static_cast<double>(count);
      model_->output_gradient() *= static_cast<T>(weight);
      loss += micro_loss * weight;
    }
    clock.lap(&StepProfile::forward_s);
    const bool last = m + 1 == micro_batches;
    if (last && start_sync) {
      // Note [the loss rides with the gradients]: the loss slot is final before backward.
      model_->gradients()[model_->parameter_count()] = static_cast<T>(loss);
      reducer_.begin(model_->gradients(), static_cast<size_t>(model_->parameter_count() + 1));
      sync_started_ = true;
      model_->backward(x, &ready_forwarder_);
    } else {
      model_->backward(x);
    }
    clock.lap(&StepProfile::backward_s);
    first += size;
  }
  return loss;
}

template <typename T>
double Trainer<T>::synchronize(double local_loss) {
  // Note [the loss rides with the gradients]: the step's reported loss is the mean over the
  // whole global batch, not rank 0's shard. Every rank's shard has the same size, so that
  // is the mean of the per-rank losses: exactly what the reducer computes for a gradient.
  // Putting the loss in one slot after the gradients gets it for free in the same
  // allreduce, without a second round trip. A NaN or Inf on any rank also lands there.
  PhaseClock clock(options_.profile);
  const Index p = model_->parameter_count();
  T* grads = model_->gradients();
  if (sync_started_) {
    // The overlapped reduction has been sending buckets since backward began, so this
    // rank's own gradients can no longer be inspected: only its loss names it if a step
    // turns out non-finite (handle_nonfinite_step says so).
    locally_finite_ = std::isfinite(local_loss);
    gradients_inspected_ = false;
    reducer_.finish();
    sync_started_ = false;
  } else {
    grads[p] = static_cast<T>(local_loss);
    locally_finite_ = all_finite(grads, p + 1);  // the reduction overwrites them: look first
    gradients_inspected_ = true;
    reducer_.reduce(grads, static_cast<size_t>(p + 1));
  }
  clock.lap(&StepProfile::sync_exposed_s);
  return static_cast<double>(grads[p]);
}

template <typename T>
double Trainer<T>::unsynchronized_loss(double local_loss) {
  // sync off: only the loss is reduced, to report the global mean. A rank whose gradients
  // are not finite sends NaN, so the decision below is still the same on every rank.
  locally_finite_ = std::isfinite(local_loss) &&
                    all_finite(model_->gradients(), model_->parameter_count());
  double loss = locally_finite_ ? local_loss : std::numeric_limits<double>::quiet_NaN();
  comm_.allreduce_sum(&loss, 1);
  return loss / comm_.size();
}

template <typename T>
bool Trainer<T>::step_is_finite(double loss) const {
  // Note [non-finite steps are decided together]: a NaN or Inf in any rank's loss or
  // gradient makes the reduced sum non-finite in the same slot on every rank (NaN + x is NaN,
  // Inf - Inf is NaN), and every rank holds the same reduced buffer. So each rank scans its
  // own copy and all reach the same decision in the same step, with no extra message when
  // all is well. Only when a step is non-finite does handle_nonfinite_step spend one small
  // collective to learn which ranks saw it first.
  if (!config_.sync) return std::isfinite(loss);
  return all_finite(model_->gradients(), model_->parameter_count() + 1);
}

template <typename T>
void Trainer<T>::handle_nonfinite_step(int64_t step, int64_t epoch) {
  const auto saw = comm_.allgather(locally_finite_ ? 0 : 1);
  Json ranks = Json::array();
  std::string listed;
  for (size_t r = 0; r < saw.size(); ++r)
    if (saw[r]) {
      ranks.push_back(r);
      listed += (listed.empty() ? "" : ", ") + std::to_string(r);
    }
  ++skipped_in_a_row_;
  const auto& policy = config_.faults;
  const bool skip = policy.on_nonfinite == "skip" && skipped_in_a_row_ <= policy.max_skipped;
  if (comm_.rank() == 0)
    log_->write({{"kind", "nonfinite"}, {"epoch", epoch}, {"step", step}, {"ranks", ranks},
                 {"action", skip ? "skip" : "abort"}, {"skipped_in_a_row", skipped_in_a_row_}});
  const std::string origin =
      !listed.empty() ? std::string("first seen on rank") +
                            (listed.find(',') == std::string::npos ? " " : "s ") + listed
      : gradients_inspected_
          ? "although every rank's own values were finite: their sum overflowed"
          : "on a rank not identified: the reduction overlapped backward (rerun with "
            "--set reduce.overlap=false to name it)";
  const std::string what = "non-finite loss or gradient at step " + std::to_string(step) +
                           " (epoch " + std::to_string(epoch) + "), " + origin;
  if (!skip)
    throw Error(kExitNonFinite,
                what + (policy.on_nonfinite == "abort"
                            ? " (on_nonfinite = abort)"
                            : "; " + std::to_string(skipped_in_a_row_) +
                                  " non-finite steps in a row, more than max_skipped = " +
                                  std::to_string(policy.max_skipped)),
                Scope::kEveryRank);  // every rank saw the same reduced sum
  ++skipped_total_;
  if (comm_.rank() == 0)
    std::fprintf(stderr, "mpiddp: warning: skipped %s (on_nonfinite = skip, %lld in a row)\n",
                 what.c_str(), static_cast<long long>(skipped_in_a_row_));
}

template <typename T>
nn::EvalSums Trainer<T>::evaluate(const data::Dataset<T>& set) {
  // Rank r evaluates samples r, r+N, r+2N, ... with no padding, so each sample counts once;
  // the sums are reduced in double, which makes the result independent of N to ~1e-16.
  nn::EvalSums sums;
  const Index n = set.samples, world = comm_.size();
  std::vector<Index>& chunk = eval_chunk_;
  for (Index first = comm_.rank(); first < n; first += world * batch_per_rank_) {
    Index count = 0;
    for (Index i = first; i < n && count < batch_per_rank_; i += world) chunk[count++] = i;
    gather(set, chunk.data(), count);
    ConstMatrixView<T> x(batch_x_.data(), set.features, count);
    const nn::BatchTargets<T> targets{batch_y_.data(), batch_labels_.data()};
    loss_->accumulate(model_->forward(x), targets, sums);
  }
  double totals[2] = {sums.loss_sum, sums.correct};
  comm_.allreduce_sum(totals, 2);
  return {totals[0] / static_cast<double>(n), totals[1] / static_cast<double>(n)};
}

template <typename T>
EpochResult Trainer<T>::finish_epoch(int64_t epoch, double train_seconds, Index samples_seen) {
  const auto start = std::chrono::steady_clock::now();
  EpochResult e;
  e.epoch = epoch;
  const nn::EvalSums on_train = evaluate(train_);
  e.train_loss = on_train.loss_sum;
  const nn::EvalSums on_eval = eval_ ? evaluate(*eval_) : on_train;
  e.eval_loss = on_eval.loss_sum;
  if (loss_->is_classification()) e.eval_accuracy = on_eval.correct;
  e.time_s = train_seconds + seconds_since(start);
  e.samples_per_s = static_cast<double>(samples_seen) / train_seconds;

  if (comm_.rank() == 0) {
    Json record = {{"kind", "epoch"}, {"epoch", e.epoch}, {"eval_loss", e.eval_loss}};
    if (e.eval_accuracy) record["eval_accuracy"] = *e.eval_accuracy;
    if (eval_) record["train_loss"] = e.train_loss;
    record["time_s"] = e.time_s;
    record["samples_per_s"] = e.samples_per_s;
    log_->write(record);
    if (!options_.quiet) {
      char accuracy[32] = "-";
      if (e.eval_accuracy) std::snprintf(accuracy, sizeof accuracy, "%.4f", *e.eval_accuracy);
      std::printf("%6lld  %14.8g  %9s  %8.3f  %10.0f\n", static_cast<long long>(e.epoch),
                  e.eval_loss, accuracy, e.time_s, e.samples_per_s);
      std::fflush(stdout);
    }
  }
  return e;
}

template <typename T>
void Trainer<T>::verify_replicas(int64_t step, bool at_end, RunResult* result) {
  const ReplicaReport report = check_replicas<T>(comm_, model_->parameters(),
                                                 model_->parameter_count(), replica_scratch_.data(),
                                                 static_cast<Index>(replica_scratch_.size()));
  if (result) result->replicas = report;
  if (config_.sync && !report.identical) {
    // The report is the same on every rank, so every rank takes the same branch here.
    std::string ranks;
    for (int r : report.differing_ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    char text[320];
    std::snprintf(text, sizeof text,
                  "replicas diverged at step %lld: the parameters of rank%s %s differ from rank "
                  "0's (max |difference| %.9g) although gradients are synchronised",
                  static_cast<long long>(step), report.differing_ranks.size() > 1 ? "s" : "",
                  ranks.c_str(), report.max_diff);
    if (config_.faults.divergence_action == "abort") throw Error(kExitDivergence, text, Scope::kEveryRank);
    resynchronize();
    ++resyncs_;
    if (comm_.rank() == 0) {
      log_->write({{"kind", "resync"}, {"step", step}, {"ranks", report.differing_ranks},
                   {"max_diff", report.max_diff}});
      std::fprintf(stderr, "mpiddp: warning: %s; every rank now holds rank 0's parameters and "
                           "optimizer state (divergence.action = resync)\n", text);
    }
    if (result) result->replicas = check_replicas<T>(comm_, model_->parameters(),
                                                     model_->parameter_count(),
                                                     replica_scratch_.data());
  }
  if (at_end && !config_.sync && comm_.rank() == 0 && !options_.quiet) {
    std::printf("sync is off: replicas %s (max_replica_diff %.9g): each rank learned only "
                "from its own shard\n",
                report.identical ? "are still identical" : "drifted apart", report.max_diff);
  }
}

template <typename T>
void Trainer<T>::resynchronize() {
  // Rank 0's replica becomes everyone's: parameters and every optimizer state buffer.
  comm_.broadcast(model_->parameters(),
                  static_cast<size_t>(model_->parameter_count()) * sizeof(T), 0);
  for (auto& state : optimizer_->state_buffers())
    comm_.broadcast(state.values->data(), state.values->size() * sizeof(T), 0);
}

template <typename T>
void Trainer<T>::start() {
  // The command line arms it before setup already; library callers get it here.
  comm_.start_watchdog(config_.faults.watchdog_timeout_s,
                       config_.faults.watchdog_action == "abort");
  // Creating the shared memory for the gradients is a collective, so here.
  place_for_reduction(reducer_, *model_);
  // Rank 0 reads sampler.order and broadcasts it: a collective, so here rather than in the
  // constructor, whose setup stays local (see TrainingRun).
  if (!config_.sampler_order.empty())
    order_ = load_sample_order(comm_, config_.sampler_order, train_.samples, config_.epochs);
  position_ = initial_state();
  // Rank 0's initial parameters are everyone's: replicas start identical even if a rank's
  // initialisation differed (another build, another libm), and init.weights is read there.
  comm_.broadcast(model_->parameters(),
                  static_cast<size_t>(model_->parameter_count()) * sizeof(T), 0);
  const uint64_t mine = mix_seed(config_hash(config_), fnv1a(model_->describe()));
  const auto all = comm_.allgather(mine);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error(kExitConfig,
                  "rank " + std::to_string(r) + "'s config or model differs from rank 0's (hash " +
                      hex64(all[r]) + " vs " + hex64(all[0]) +
                      "): every rank must run the same config and build",
                  Scope::kEveryRank);
  // Every rank's host, in rank order (a collective: every rank takes part).
  const std::vector<std::string> hosts = comm_.allgather_string(comm_.host_name());
  if (comm_.rank() == 0) {
    Json run_record = {{"kind", "run"},
                       {"world_size", comm_.size()},
                       {"launcher", options_.launcher},
                       {"hosts", hosts},
                       {"config", config_.resolved},
                       {"version", MPIDDP_VERSION},
                       {"mpi_library", comm_.library_version()},
                       {"parameters", model_->parameter_count()},
                       {"threads", threads_},
                       {"reduce_algorithm", dist::to_string(reducer_.algorithm())},
                       {"model", model_->describe()}};
    if (!resumed_from_.empty())
      run_record["resumed_from"] = {{"path", resumed_from_}, {"epoch", position_.epoch},
                                    {"batch", position_.batch}, {"step", position_.step}};
    log_->write(run_record);
    if (!options_.quiet) {
      std::printf("mpiddp %s: %d rank%s, model %s (%lld parameters), global batch %lld, %s\n",
                  MPIDDP_VERSION, comm_.size(), comm_.size() == 1 ? "" : "s",
                  model_->describe().c_str(), static_cast<long long>(model_->parameter_count()),
                  static_cast<long long>(batch_per_rank_ * comm_.size()), config_.dtype.c_str());
      std::printf("%6s  %14s  %9s  %8s  %10s\n", "epoch", "eval_loss", "eval_acc", "time_s",
                  "samples/s");
      std::fflush(stdout);
    }
  }
}

template <typename T>
RunResult Trainer<T>::run() {
  const auto run_start = std::chrono::steady_clock::now();
  eval_chunk_.assign(batch_per_rank_, 0);
  start();
  RunResult result;
  const Index per_rank = sampler_.per_rank();
  const Index steps_per_epoch = (per_rank + batch_per_rank_ - 1) / batch_per_rank_;
  const int64_t total_steps = steps_per_epoch * config_.epochs;
  if (options_.keep_history) result.step_losses.reserve(static_cast<size_t>(total_steps));
  ProgressLine progress(stderr, ProgressLine::mode_for(stderr, options_.quiet, comm_.rank() == 0,
                                                               std::getenv("MPIDDP_PROGRESS")),
                        config_.epochs, total_steps, batch_per_rank_ * comm_.size());
  int64_t step = position_.step;
  for (int64_t epoch = position_.epoch; epoch <= config_.epochs; ++epoch) {
    sampler_.set_epoch(epoch - 1, replay_order(epoch - 1));
    // The profile covers the epochs after the first, which warms up caches and pages.
    if (options_.profile && epoch <= 2) options_.profile->reset();
    const auto epoch_start = std::chrono::steady_clock::now();
    const Index first_batch = epoch == position_.epoch ? position_.batch : 0;
    for (Index k = first_batch; k < steps_per_epoch; ++k) {
      ++step;
      comm_.publish_step(step);
      const Index first = k * batch_per_rank_;
      const Index count = std::min(batch_per_rank_, per_rank - first);
      const double cpu_start = options_.profile ? process_cpu_seconds() : 0.0;
      // Fault injection writes into the gradient buffer after backward, which an overlapped
      // reduction may already be sending: a run with injection reduces after backward.
      const bool overlap =
          config_.sync && config_.reduce.overlap && !config_.faults.inject.enabled();
      const double local_loss =
          compute_gradients(sampler_.indices().data() + first, count, overlap);
      inject_step_fault(config_.faults.inject, comm_.rank(), step, model_->gradients());
      const double loss = config_.sync ? synchronize(local_loss) : unsynchronized_loss(local_loss);
      if (options_.keep_history) result.step_losses.push_back(loss);
      if (!step_is_finite(loss)) {
        handle_nonfinite_step(step, epoch);  // throws unless the step is skipped: no update
        continue;
      }
      skipped_in_a_row_ = 0;
      const double lr = optim::scheduled_lr(config_.schedule, config_.optimizer.lr, step, epoch,
                                            total_steps, config_.epochs);
      PhaseClock clock(options_.profile);
      optimizer_->step(model_->parameters(), model_->gradients(), lr);
      clock.lap(&StepProfile::optimizer_s);
      if (options_.profile) {
        options_.profile->cpu_s += process_cpu_seconds() - cpu_start;
        ++options_.profile->steps;
      }
      inject_update_fault(config_.faults.inject, comm_.rank(), step, model_->parameters());
      if (comm_.rank() == 0 && step % config_.log_every_steps == 0)
        log_->write({{"kind", "step"}, {"epoch", epoch}, {"step", step}, {"loss", loss}, {"lr", lr}});
      if (config_.check_every_steps > 0 && step % config_.check_every_steps == 0)
        verify_replicas(step, false, nullptr);
      progress.update(epoch, step, loss, seconds_since(run_start));
      if (k + 1 < steps_per_epoch && checkpoint_due_mid_epoch(config_.checkpoint, step))
        save_checkpoint({epoch, k + 1, step});
    }
    progress.clear();  // the epoch's table line goes where the progress line was
    // A resumed epoch trains only the samples after its first batch.
    const EpochResult done = finish_epoch(epoch, seconds_since(epoch_start),
                                          (per_rank - first_batch * batch_per_rank_) * comm_.size());
    if (options_.keep_history) result.epochs.push_back(done);
    if (checkpoint_due_after_epoch(config_.checkpoint, epoch, step, epoch == config_.epochs))
      save_checkpoint({epoch + 1, 0, step});
  }
  progress.finish(seconds_since(run_start));
  result.steps = step;
  verify_replicas(step, true, &result);
  save_final_weights();
  result.skipped_steps = skipped_total_;
  result.resyncs = resyncs_;
  result.time_s = seconds_since(run_start);
  if (comm_.rank() == 0)
    log_->write({{"kind", "end"},
                {"steps", result.steps},
                {"param_checksum", result.replicas.checksum},
                {"replicas_identical", result.replicas.identical},
                {"max_replica_diff", result.replicas.max_diff},
                {"skipped_steps", result.skipped_steps},
                {"resyncs", result.resyncs},
                {"time_s", result.time_s}});
  return result;
}

std::unique_ptr<TrainingRun> prepare_training(const Config& config, dist::Communicator& comm,
                                              TrainOptions options) {
  if (config.dtype == "float64") return std::make_unique<Trainer<double>>(config, comm, options);
  return std::make_unique<Trainer<float>>(config, comm, options);
}

RunResult run_training(const Config& config, dist::Communicator& comm, TrainOptions options) {
  return prepare_training(config, comm, options)->run();
}

template <typename T>
void plan_reduction(dist::GradientReducer<T>& reducer, const nn::Sequential<T>& model) {
  std::vector<size_t> tensor_begins;
  for (const auto& tensor : model.tensors()) tensor_begins.push_back(static_cast<size_t>(tensor.offset));
  tensor_begins.push_back(static_cast<size_t>(model.parameter_count()));  // the loss slot
  reducer.set_tensor_begins(std::move(tensor_begins));
}

template <typename T>
void place_for_reduction(dist::GradientReducer<T>& reducer, nn::Sequential<T>& model) {
  if (T* shared = reducer.allocate_shared_buffer(static_cast<size_t>(model.gradient_count())))
    model.place_gradients(shared);
}

template class Trainer<float>;
template class Trainer<double>;
template void plan_reduction(dist::GradientReducer<float>&, const nn::Sequential<float>&);
template void plan_reduction(dist::GradientReducer<double>&, const nn::Sequential<double>&);
template void place_for_reduction(dist::GradientReducer<float>&, nn::Sequential<float>&);
template void place_for_reduction(dist::GradientReducer<double>&, nn::Sequential<double>&);

}  // namespace mpiddp::train
