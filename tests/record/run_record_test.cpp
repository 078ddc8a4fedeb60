// The run record as a part (record/run_record.hpp), on the one-process path: what it writes to a
// real log file, read back line by line. The records' keys and their order are the public log
// format (docs/log-format.md); the whole trainer's records are checked by the CLI tests.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "../support/scratch_dir.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/record/run_record.hpp"

namespace mpiddp::record {
namespace {

config::Config logging_config(const std::string& log_path, int every_steps, double clip) {
  io::Json user = config::default_experiment();
  config::apply_override(user, "log.path=\"" + log_path + "\"");
  config::apply_override(user, "log.every_steps=" + std::to_string(every_steps));
  if (clip > 0.0) config::apply_override(user, "optimizer.clip_grad_norm=" + std::to_string(clip));
  return config::parse_config(user);
}

std::vector<io::Json> read_records(const std::string& path) {
  std::ifstream in(path);
  std::vector<io::Json> records;
  for (std::string line; std::getline(in, line);) records.push_back(io::Json::parse(line));
  return records;
}

std::vector<std::string> keys_of(const io::Json& record) {
  std::vector<std::string> keys;
  for (const auto& item : record.items()) keys.push_back(item.key());
  return keys;
}

RunFacts facts_of_a_resumed_run() {
  RunFacts facts;
  facts.launcher = "none";
  facts.hosts = {"node-a"};
  facts.model = "mlp(4-8-3)";
  facts.parameters = 67;
  facts.global_batch = 16;
  facts.threads = 1;
  facts.gemm = {{"backend", "eigen"}};
  facts.reduce_algorithm = "mpi";
  facts.reduce_compress = "none";
  facts.step_description = {{"deterministic", {{"chunks", 4}, {"pass", "chunked"}}}};
  facts.resumed_from = resume_point("ckpt/step-4.ckpt", {2, 0, 4});
  facts.memory = {{"needed_mb", 1.5}, {"by_kind", {{"parameters", 1.5}}}};
  return facts;
}

TEST(RunRecord, OpensTheLogWithTheRunRecordInItsDocumentedOrder) {
  const std::string log = test::scratch_dir("run_record_open") + "/log.jsonl";
  const config::Config config = logging_config(log, 1, 0.0);
  distributed::LocalCommunicator comm;
  {
    RunRecord record(config, comm, /*quiet=*/true, std::nullopt);
    record.open(facts_of_a_resumed_run(), {2, 0, 4});
  }
  const auto records = read_records(log);
  ASSERT_EQ(records.size(), 1u);
  const std::vector<std::string> keys = keys_of(records[0]);
  // The prefix every reader of the log relies on, then the keys appended since, the step
  // strategy's, and the resume point.
  const std::vector<std::string> expected = {
      "kind", "world_size", "launcher", "hosts", "config", "version", "mpi_library", "parameters", "threads", "gemm",
      "reduce_algorithm", "reduce_compress", "reduce_shard_optimizer", "reduction", "model", "reduce_shard_across",
      "reduce_shard", "memory", "isa", "precision", "deterministic", "resumed_from"};
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(records[0]["kind"], "run");
  EXPECT_EQ(records[0]["world_size"], 1);
  EXPECT_EQ(records[0]["parameters"], 67);
  EXPECT_EQ(records[0]["reduce_shard_optimizer"], false);
  EXPECT_EQ(records[0]["reduce_shard_across"], "none");
  EXPECT_EQ(records[0]["reduce_shard"], "none");
  EXPECT_EQ(records[0]["memory"]["needed_mb"], 1.5);
  EXPECT_EQ(records[0]["deterministic"]["chunks"], 4);
  EXPECT_EQ(records[0]["resumed_from"], (io::Json{{"path", "ckpt/step-4.ckpt"}, {"epoch", 2}, {"batch", 0}, {"step", 4}}));
}

TEST(RunRecord, WritesEveryNthStepAndTheGradientNormOnlyWithClipping) {
  for (const double clip : {0.0, 1.5}) {
    const std::string log = test::scratch_dir("run_record_steps") + "/log.jsonl";
    const config::Config config = logging_config(log, 3, clip);
    distributed::LocalCommunicator comm;
    {
      RunRecord record(config, comm, true, std::nullopt);
      for (int64_t step = 1; step <= 7; ++step) record.step(1, step, 0.25 * step, 0.1, 0.5, 2.0 * step);
      record.end({7, "00ff", true, 0.0, 1, 0, 3.5});
    }
    const auto records = read_records(log);
    ASSERT_EQ(records.size(), 3u) << "clip " << clip;
    EXPECT_EQ(records[0]["step"], 3);
    EXPECT_EQ(records[0]["loss"], 0.75);
    EXPECT_EQ(records[1]["step"], 6);
    EXPECT_EQ(records[0].contains("grad_norm"), clip > 0.0);
    if (clip > 0.0) {
      EXPECT_EQ(records[1]["grad_norm"], 12.0);
    }
    EXPECT_EQ(keys_of(records[2]), (std::vector<std::string>{"kind", "steps", "param_checksum", "replicas_identical",
                                                             "max_replica_diff", "skipped_steps", "resyncs", "time_s"}));
    EXPECT_EQ(records[2]["param_checksum"], "00ff");
    EXPECT_EQ(records[2]["skipped_steps"], 1);
  }
}

TEST(RunRecord, ARestartCarriesThePreviousAttemptsRecordsUpToItsCheckpoint) {
  const std::string log = test::scratch_dir("run_record_restart") + "/log.jsonl";
  {
    // The previous attempt: its run record, 6 steps (epoch 1 ended after step 4), no end.
    std::ofstream previous(log);
    previous << R"({"kind":"run","world_size":2})" << "\n";
    for (int step = 1; step <= 6; ++step) {
      previous << R"({"kind":"step","epoch":)" << (step <= 4 ? 1 : 2) << R"(,"step":)" << step << "}\n";
      if (step == 4) previous << R"({"kind":"epoch","epoch":1,"step":4})" << "\n";
    }
  }
  const config::Config config = logging_config(log, 1, 0.0);
  distributed::LocalCommunicator comm;
  checkpoint::RestartInfo restart;
  restart.attempt = 2;
  restart.exit_code = 137;
  restart.previous_world_size = 2;
  {
    RunRecord record(config, comm, true, restart);
    record.open(facts_of_a_resumed_run(), {2, 0, 4});
    record.step(2, 5, 1.0, 0.1, 0.5, 0.0);
  }
  const auto records = read_records(log);
  // The old run record (not a new one), steps 1-4 and epoch 1, the restart record, the new step 5.
  ASSERT_EQ(records.size(), 8u);
  EXPECT_EQ(records[0], (io::Json{{"kind", "run"}, {"world_size", 2}}));
  EXPECT_EQ(records[4]["step"], 4);
  EXPECT_EQ(records[5]["kind"], "epoch");
  EXPECT_EQ(keys_of(records[6]),
            (std::vector<std::string>{"kind", "attempt", "exit_code", "from", "previous_world_size", "world_size", "hosts"}));
  EXPECT_EQ(records[6]["attempt"], 2);
  EXPECT_EQ(records[6]["exit_code"], 137);
  EXPECT_EQ(records[6]["from"]["step"], 4);
  EXPECT_EQ(records[6]["world_size"], 1);
  EXPECT_EQ(records[7]["step"], 5);
}

}  // namespace
}  // namespace mpiddp::record
