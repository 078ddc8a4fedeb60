// mpiddp bench: trains a benchmark config (its last epoch timed) and prints one JSON line
// of figures on rank 0. bench/run.sh drives it; bench/README.md explains every key.
#include <chrono>
#include <algorithm>
#include <filesystem>
#include <limits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/core/memory.hpp"
#include "mpiddp/core/threads.hpp"
#include "mpiddp/distributed/gradient_reducer.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/tools/config_args.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::tools {

namespace {

struct BenchArgs {
  ConfigArgs config;
  int reduce_repeats = 20;
  bool reduce_only = false;  // time the gradient reduction alone, without training
};

BenchArgs parse_bench_args(int argc, char** argv) {
  BenchArgs args;
  for (int i = 1; i < argc; ++i) {
    if (take_config_argument(args.config, argc, argv, i)) continue;
    const std::string arg = argv[i];
    if (arg == "--reduce-repeats") {
      args.reduce_repeats = std::atoi(option_value(argc, argv, i, "--reduce-repeats").c_str());
      if (args.reduce_repeats < 1) throw ConfigError("--reduce-repeats", "expected an integer >= 1");
    } else if (arg == "--reduce-only") {
      args.reduce_only = true;
    } else {
      reject_argument(arg);
    }
  }
  if (args.config.config_path.empty())
    throw ConfigError("bench", "needs a config file, e.g. bench/mlp.json");
  return args;
}

// Mean seconds of one GradientReducer::reduce on the model's gradient buffer (with the loss
// slot), planned as the trainer does and where place_for_reduction put it, with nothing else
// running; the slowest rank's figure. Overwrites the gradients.
template <typename T>
double time_reduce(const config::Config& config, distributed::Communicator& comm,
                   nn::Model<T>& model, int repeats) {
  distributed::GradientReducer<T> reducer(comm, config.reduce);
  train::plan_reduction(reducer, model);
  const auto count = static_cast<size_t>(model.gradient_count());  // P + reserved slots
  T* grads = model.gradients();
  std::fill_n(grads, count, T(1));
  for (int i = 0; i < 3; ++i) reducer.reduce(grads, count);  // warm-up: first touch, windows
  comm.barrier();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < repeats; ++i) reducer.reduce(grads, count);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  comm.allreduce_max(&seconds, 1);
  return seconds / repeats;
}

// --reduce-only: the model's gradient buffer shape, reduced repeatedly; nothing trained.
template <typename T>
void run_reduce_only(const config::Config& config, const BenchArgs& args, distributed::Communicator& comm) {
  if (config.model_inputs <= 0 && config.model_input_shape.empty())
    throw ConfigError("model.input_shape", "--reduce-only needs model.input_shape or model.inputs");
  const nn::Shape input = config.model_input_shape.empty() ? nn::Shape{config.model_inputs}
                                                           : config.model_input_shape;
  nn::Model<T> model(input, config.layers, 1, train::kReservedSlots);  // as the trainer's buffer
  distributed::GradientReducer<T> reducer(comm, config.reduce);
  train::place_for_reduction(reducer, model);
  const double reduce_s = time_reduce<T>(config, comm, model, args.reduce_repeats);
  double rss = peak_rss_mb();
  comm.allreduce_max(&rss, 1);
  if (comm.rank() != 0) return;
  const io::Json line = {
      {"workload", std::filesystem::path(args.config.config_path).stem().string()},
      {"np", comm.size()},
      {"reduce_algorithm", distributed::to_string(reducer.algorithm())},
      {"reduce_compress", distributed::to_string(reducer.compression())},
      {"gradient_mb", static_cast<double>(model.gradient_count()) * sizeof(T) / 1e6},
      {"reduce_ms", reduce_s * 1e3},
      {"repeats", args.reduce_repeats},
      {"peak_rss_mb", rss},
  };
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

// What a rank would hold in each reduce.shard mode this build has, in MiB (train/memory_plan.hpp):
// the figures a user compares before choosing one.
template <typename T>
io::Json needed_mb_by_shard(const train::Trainer<T>& trainer, const config::Config& config,
                            distributed::Communicator& comm, const distributed::GradientReducer<T>& reducer) {
  const bool compressed = reducer.compression() != distributed::Compression::kNone;
  io::Json by_shard = io::Json::object();
  for (const char* mode : {"none", "optimizer", "gradients", "parameters"}) {
    config::Config variant = config;
    variant.reduce.set_shard(mode);
    // A mode that cannot serve this config here: null.
    const bool shares = reducer.shares_node_memory();
    if (train::shard_refusal(variant, comm, shares)) {
      by_shard[mode] = nullptr;
      continue;
    }
    const distributed::ShardScope scope = train::step_shard_scope(variant, comm, shares, compressed);
    by_shard[mode] =
        train::mebibytes(train::memory_need_in_scope(variant, comm, scope, compressed, trainer.memory_facts()).total());
  }
  return by_shard;
}

template <typename T>
void run_bench(const config::Config& config, const BenchArgs& args, distributed::Communicator& comm) {
  if (args.reduce_only) return run_reduce_only<T>(config, args, comm);
  record::StepProfile profile;
  train::TrainOptions options;
  options.quiet = true;
  options.profile = &profile;
  train::Trainer<T> trainer(config, comm, options);
  const train::RunResult result = trainer.run();
  // Peak RSS of training, and the PSS at its end (which divides the node's shared pages
  // among its ranks), before time_reduce below.
  double memory[3] = {peak_rss_mb(), current_pss_mb(), shared_huge_page_mb()};
  comm.allreduce_max(memory, 3);
  const double rss = memory[0], pss = memory[1], shm_huge = memory[2];
  // Throughput of the timed epochs: all but the first (warm-up) when there are several.
  // Every epoch trains the same number of samples, so that is the harmonic mean of the
  // epochs' rates: total samples over total training time.
  double epochs = 0, seconds_per_sample = 0;
  for (size_t e = result.epochs.size() > 1 ? 1 : 0; e < result.epochs.size(); ++e) {
    seconds_per_sample += 1.0 / result.epochs[e].samples_per_s;
    epochs += 1.0;
  }
  const double samples_per_s = epochs / seconds_per_sample;
  // reduce.shard "gradients" keeps no whole gradient buffer to time (null in the line).
  const double reduce_s = trainer.model().gradients() != nullptr
                              ? time_reduce<T>(config, comm, trainer.model(), args.reduce_repeats)
                              : std::numeric_limits<double>::quiet_NaN();

  // Per-step means of this rank, then averaged over ranks.
  const double steps = static_cast<double>(std::max<int64_t>(1, profile.steps));
  double phases[6] = {profile.forward_s / steps, profile.backward_s / steps,
                      profile.sync_exposed_s / steps, profile.optimizer_s / steps,
                      profile.data_s / steps, profile.optimizer_cpu_s / steps};
  comm.allreduce_sum(phases, 6);
  for (double& p : phases) p /= comm.size();
  // CPU seconds of one step, summed over ranks: the machine's cost of a global batch.
  double cpu_per_step = profile.cpu_s / steps;
  comm.allreduce_sum(&cpu_per_step, 1);
  if (comm.rank() != 0) return;

  const auto& model = trainer.model();
  const double flops_per_sample = 6.0 * model.multiply_adds_per_sample();
  const distributed::GradientReducer<T> reducer(comm, config.reduce);
  // What the trainer checked against memory.limit_mb: the memory targets (peak RSS, and the
  // PSS, which shares the node's one copy of the parameters out) are stated against it.
  const io::Json need_record = train::memory_record(trainer.memory_need(), 0.0);
  const double needed = need_record["needed_mb"].get<double>();
  io::Json line = {
      {"workload", std::filesystem::path(args.config.config_path).stem().string()},
      {"np", comm.size()},
      {"threads", threads_in_use()},
      {"reduce_algorithm", distributed::to_string(reducer.algorithm())},
      {"reduce_compress", distributed::to_string(reducer.compression())},
      {"parameters", model.parameter_count()},
      {"gradient_mb", static_cast<double>(model.parameter_count() + 1) * sizeof(T) / 1e6},
      {"samples_per_s", samples_per_s},
      {"forward_ms", phases[0] * 1e3},
      {"backward_ms", phases[1] * 1e3},
      {"sync_exposed_ms", phases[2] * 1e3},
      {"optimizer_ms", phases[3] * 1e3},
      {"optimizer_cpu_ms", phases[5] * 1e3},
      {"data_ms", phases[4] * 1e3},
      {"reduce_ms", reduce_s * 1e3},
      {"gflops", flops_per_sample * samples_per_s / 1e9},
      {"cpu_ms_per_step", cpu_per_step * 1e3},
      {"samples_per_cpu_s", static_cast<double>(config.global_batch(comm.size())) / cpu_per_step},
      {"peak_rss_mb", rss},
      {"needed_mb", needed},
      {"needed_mb_by_kind", need_record["by_kind"]},
      {"needed_mb_by_shard", needed_mb_by_shard(trainer, config, comm, reducer)},
      {"rss_ratio", rss / needed},
      {"pss_mb", pss},
      {"pss_ratio", pss / needed},
      {"shm_huge_mb", shm_huge},
      {"final_loss", result.epochs.back().eval_loss},
  };
  std::printf("%s\n", line.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int bench_command(int argc, char** argv) {
  distributed::MpiRuntime runtime(&argc, &argv);
  distributed::MpiCommunicator comm;
  try {
    const BenchArgs args = parse_bench_args(argc, argv);
    const config::Config config = load_config(args.config, io::Json());
    if (config.dtype == "float64")
      run_bench<double>(config, args, comm);
    else
      run_bench<float>(config, args, comm);
  } catch (const ConfigError& e) {
    if (comm.rank() == 0) std::fprintf(stderr, "mpiddp: %s\n", e.what());
    return e.code();
  } catch (const Error& e) {
    comm.abort(e.code(), e.what());
  } catch (const std::exception& e) {
    comm.abort(kExitFailure, std::string("unexpected error: ") + e.what());
  }
  return kExitOk;
}

}  // namespace mpiddp::tools
