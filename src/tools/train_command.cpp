// mpiddp train: parse the command line and config on every rank, then train.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/interrupt.hpp"
#include "mpiddp/distributed/flight_recorder.hpp"
#include "mpiddp/distributed/launcher.hpp"
#include "mpiddp/distributed/mpi_communicator.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/train/trainer.hpp"
#include "mpiddp/tools/config_args.hpp"
#include "mpiddp/tools/train_command.hpp"

namespace mpiddp::tools {

namespace {

struct TrainArgs {
  ConfigArgs config;  // no config path: the built-in default experiment
  train::TrainOptions options{.keep_history = false};  // the log has it: memory stays flat
};

// A path as a JSON string literal, so that quotes and backslashes in it survive --set parsing.
std::string as_json_string(const std::string& path) { return io::Json(path).dump(); }

TrainArgs parse_train_args(int argc, char** argv) {
  TrainArgs args;
  for (int i = 1; i < argc; ++i) {
    if (take_config_argument(args.config, argc, argv, i)) continue;
    const std::string arg = argv[i];
    if (arg == "--log") {
      args.config.overrides.push_back("log.path=" + as_json_string(option_value(argc, argv, i, "--log")));
    } else if (arg == "--trace") {
      args.config.overrides.push_back("trace.path=" + as_json_string(option_value(argc, argv, i, "--trace")));
    } else if (arg == "--no-sync") {
      args.config.overrides.push_back("sync=false");
    } else if (arg == "--resume") {
      args.options.resume = option_value(argc, argv, i, "--resume");
    } else if (arg == "--restart") {
      args.options.restart = checkpoint::parse_restart_info(option_value(argc, argv, i, "--restart"));
    } else if (arg == "--save-weights") {
      args.config.overrides.push_back(
          "save_weights=" + as_json_string(option_value(argc, argv, i, "--save-weights")));
    } else if (arg == "--quiet") {
      args.options.quiet = true;
    } else {
      reject_argument(arg);
    }
  }
  return args;
}

// The run on this rank, between MPI_Init and MPI_Finalize; returns the exit code.
int train_rank(int argc, char** argv, const std::string& launcher, int launched) {
  // After MPI_Init, so that ours are the handlers: SIGTERM, SIGINT and SIGUSR1 stop every
  // rank together at a step boundary with a checkpoint (Note [stopping on a signal]), and the
  // watchdog thread writes the flight recorder on them (Note [the flight recorder]).
  install_interrupt_handlers();
  distributed::MpiCommunicator comm;
  config::Config config;
  std::unique_ptr<train::TrainingRun> run;

  // Phase 1, setup: parse the command line and config, load the data, build the model. It
  // is local work on every rank, so a rank that fails here (a file only it cannot read)
  // is not yet in any collective; one allgather of the outcome then lets every rank return
  // together, with the job's exit code, instead of leaving the others waiting.
  int code = kExitOk;
  std::string failure;
  try {
    distributed::check_world_size(launched, comm.size());
    TrainArgs args = parse_train_args(argc, argv);
    args.options.launcher = launcher;
    config = load_config(args.config, config::default_experiment());
    // Before the rest of setup, so that a rank stuck in it writes its flight file too.
    comm.set_flight_file(distributed::flight_file_path(config.faults.flight_dir, config.log_path,
                                                       comm.rank()));
    run = train::prepare_training(config, comm, args.options);
    if (comm.rank() == 0 && config.checkpoint.dir.empty() && std::getenv("SLURM_JOB_ID"))
      std::fprintf(stderr, "mpiddp: warning: no checkpoint.dir: if Slurm ends this job (time "
                           "limit, preemption), the run stops cleanly but cannot continue\n");
  } catch (const Error& e) {
    code = e.code();
    failure = e.what();
  } catch (const std::exception& e) {
    code = kExitFailure;
    failure = std::string("unexpected error: ") + e.what();
  }
  // The watchdog watches the agreement too: a rank stuck in setup (a hung file system)
  // is reported by the ranks waiting for it. A rank whose config failed uses the defaults.
  const config::FaultConfig defaults;
  const config::FaultConfig& faults = code == kExitOk ? config.faults : defaults;
  comm.start_watchdog(faults.watchdog_timeout_s, faults.watchdog_action == "abort");
  const auto codes = comm.allgather(static_cast<uint64_t>(code));
  int job_code = kExitOk;
  bool same_everywhere = true;
  for (const auto c : codes) {
    if (job_code == kExitOk) job_code = static_cast<int>(c);
    same_everywhere = same_everywhere && c == codes[0];
  }
  if (job_code != kExitOk) {
    // The same failure on every rank (a bad config) is said once; a failure on some ranks
    // only is said by each of them, with its rank.
    if (same_everywhere && comm.rank() == 0) std::fprintf(stderr, "mpiddp: %s\n", failure.c_str());
    if (!same_everywhere && code != kExitOk)
      std::fprintf(stderr, "rank %d: %s\n", comm.rank(), failure.c_str());
    return job_code;
  }

  // Phase 2, training: from here on, a failure seen by one rank only ends the whole job
  // with MPI_Abort, since the other ranks are (or soon will be) waiting in a collective.
  try {
    run->run();
  } catch (const Error& e) {
    // An error every rank raised identically (a non-finite step, a failed replica check)
    // ends each rank cleanly, and only rank 0 prints it. Any other error may be this
    // rank's alone: abort the whole job so that no rank waits forever in a collective.
    if (!e.on_every_rank()) comm.abort(e.code(), e.what());
    if (comm.rank() == 0) std::fprintf(stderr, "mpiddp: %s\n", e.what());
    return e.code();
  } catch (const std::exception& e) {
    comm.abort(kExitFailure, std::string("unexpected error: ") + e.what());
  }
  return kExitOk;
}

}  // namespace

int train_command(int argc, char** argv) {
  const std::string launcher = distributed::detect_launcher();  // before MPI_Init: see launcher.hpp
  const int launched = distributed::launched_processes();
  distributed::MpiRuntime runtime(&argc, &argv);
  // Every MPI object of the run is gone when train_rank returns; then a bounded finalize.
  return runtime.finish(train_rank(argc, argv, launcher, launched));
}

}  // namespace mpiddp::tools
