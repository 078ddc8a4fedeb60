// The stop on a terminating signal (Note [stopping on a signal] in src/train/trainer_interrupt.cpp)
// on the one-process path (LocalCommunicator, no MPI), --resume auto, --restart's parsing and
// the records a restarted attempt's log carries on. The MPI paths: tests/cli/interrupt.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../support/scratch_dir.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/core/interrupt.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/checkpoint/restart.hpp"
#include "mpiddp/train/trainer.hpp"

namespace mpiddp::train {
namespace {

// The default experiment (4 steps per epoch, 4 epochs) with Adam, checkpoints in dir ("": none)
// and SIGTERM raised in step fail_step (0: never).
config::Config experiment(const std::string& dir, int fail_step) {
  io::Json user = config::default_experiment();
  config::apply_override(user, "optimizer={\"type\":\"adam\",\"lr\":0.01}");
  if (!dir.empty()) config::apply_override(user, "checkpoint.dir=\"" + dir + "\"");
  if (fail_step > 0) {
    config::apply_override(user, "debug.fail_rank=0");
    config::apply_override(user, "debug.fail_step=" + std::to_string(fail_step));
    config::apply_override(user, "debug.fail_kind=signal");
  }
  return config::parse_config(user);
}

// Runs until the injected signal stops it; returns the exit code of the Error.
int run_until_stopped(const config::Config& config) {
  distributed::LocalCommunicator comm;
  install_interrupt_handlers();
  try {
    run_training(config, comm, {.quiet = true});
  } catch (const Error& e) {
    clear_interrupt();
    EXPECT_TRUE(e.on_every_rank());
    return e.code();
  }
  clear_interrupt();
  return kExitOk;
}

std::string straight_checksum() {
  distributed::LocalCommunicator comm;
  return run_training(experiment("", 0), comm, {.quiet = true}).replicas.checksum;
}

TEST(Interrupt, StopsAfterTheStepWithACheckpointAndResumesExactly) {
  // Step 6 is mid-epoch (batch 2 of epoch 2); step 8 ends epoch 2, so that stop comes after
  // the epoch's evaluation and its checkpoint resumes at epoch 3, batch 0.
  for (const int step : {6, 8}) {
    const std::string dir = test::scratch_dir("interrupt_" + std::to_string(step));
    EXPECT_EQ(run_until_stopped(experiment(dir, step)), kExitInterrupted);
    ASSERT_EQ(checkpoint::list_checkpoints(dir), std::vector<std::string>{checkpoint::checkpoint_path(dir, step)});
    distributed::LocalCommunicator comm;
    const RunResult resumed = run_training(experiment(dir, 0), comm, {.quiet = true, .resume = "latest"});
    EXPECT_EQ(resumed.step_losses.size(), static_cast<size_t>(16 - step)) << step;
    EXPECT_EQ(resumed.epochs.size(), step == 8 ? 2u : 3u) << step;
    EXPECT_EQ(resumed.replicas.checksum, straight_checksum()) << step;
  }
}

TEST(Interrupt, ASignalInTheLastStepLetsTheRunFinish) {
  const std::string dir = test::scratch_dir("interrupt_last");
  EXPECT_EQ(run_until_stopped(experiment(dir, 16)), kExitOk);
}

TEST(Interrupt, WithoutACheckpointDirectoryTheExitCodeIs128PlusTheSignal) {
  EXPECT_EQ(run_until_stopped(experiment("", 6)), 128 + SIGTERM);
}

TEST(Interrupt, SignalNames) {
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGINT), "SIGINT");
  EXPECT_EQ(signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_EQ(signal_name(SIGKILL), "signal 9");
}

TEST(Interrupt, ResumeAutoStartsAfreshWithoutACheckpoint) {
  const std::string dir = test::scratch_dir("interrupt_auto");
  EXPECT_EQ(checkpoint::resolve_resume_path("auto", ""), "");
  EXPECT_EQ(checkpoint::resolve_resume_path("auto", dir), "");
  distributed::LocalCommunicator comm;
  const RunResult fresh = run_training(experiment(dir, 0), comm, {.quiet = true, .resume = "auto"});
  EXPECT_EQ(fresh.step_losses.size(), 16u);
  EXPECT_EQ(checkpoint::resolve_resume_path("auto", dir), checkpoint::checkpoint_path(dir, 16));
  // A restart after the last checkpoint of a finished run only finishes it; "latest" refuses.
  const RunResult again = run_training(experiment(dir, 0), comm, {.quiet = true, .resume = "auto"});
  EXPECT_TRUE(again.step_losses.empty());
  EXPECT_EQ(again.replicas.checksum, fresh.replicas.checksum);
  EXPECT_THROW(run_training(experiment(dir, 0), comm, {.quiet = true, .resume = "latest"}), ConfigError);
}

TEST(Restart, ParsesTheLaunchersObject) {
  const checkpoint::RestartInfo info = checkpoint::parse_restart_info(
      R"({"attempt":2,"exit_code":137,"previous_world_size":4,"reason":"rank killed"})");
  EXPECT_EQ(info.attempt, 2);
  EXPECT_EQ(info.exit_code, 137);
  EXPECT_EQ(info.previous_world_size, 4);
  EXPECT_EQ(info.reason, "rank killed");
  EXPECT_FALSE(checkpoint::parse_restart_info(R"({"attempt":1})").exit_code.has_value());
  auto key_of = [](const std::string& text) {
    try {
      checkpoint::parse_restart_info(text);
    } catch (const ConfigError& e) {
      return e.key_path();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(key_of("attempt=1"), "--restart");
  EXPECT_EQ(key_of(R"({"exit_code":1})"), "--restart.attempt");
  EXPECT_EQ(key_of(R"({"attempt":0})"), "--restart.attempt");
  EXPECT_EQ(key_of(R"({"attempt":1,"colour":"red"})"), "--restart.colour");
}

TEST(Restart, CarriesOnTheRecordsBeforeTheResumePoint) {
  const std::string path = test::scratch_dir("restart_log") + "/run.jsonl";
  const std::vector<std::string> lines = {
      R"({"kind":"run","world_size":2})",
      R"({"kind":"step","epoch":1,"step":1})",
      R"({"kind":"step","epoch":1,"step":2})",
      R"({"kind":"epoch","epoch":1,"eval_loss":0.5})",
      R"({"kind":"step","epoch":2,"step":3})",
      R"({"kind":"checkpoint","path":"c","epoch":2,"batch":1,"step":3})",
      R"({"kind":"restart","attempt":1})",
      R"({"kind":"step","epoch":2,"step":4})",
      R"({"kind":"epoch","epoch":2,"eval_loss":0.4})",
      R"({"kind":"end","steps":4})"};
  {
    std::ofstream out(path);
    for (const auto& line : lines) out << line << "\n";
    out << R"({"kind":"step","epoch":3,"st)";  // cut short by a crash
  }
  // Resuming at epoch 2 after 1 of its batches, 3 steps done: steps 1-3, epoch 1, the
  // checkpoint and the earlier restart record stay; step 4, epoch 2, the end record go.
  const std::vector<std::string> kept = checkpoint::log_lines_until(path, {2, 1, 3});
  const std::vector<std::string> expected(lines.begin(), lines.begin() + 7);
  EXPECT_EQ(kept, expected);
  EXPECT_TRUE(checkpoint::log_lines_until(path + ".missing", {2, 1, 3}).empty());
  {
    std::ofstream out(path);
    out << R"({"kind":"step","epoch":1,"step":1})" << "\n";
  }
  EXPECT_TRUE(checkpoint::log_lines_until(path, {2, 1, 3}).empty()) << "a log must start with its run record";
}

}  // namespace
}  // namespace mpiddp::train
