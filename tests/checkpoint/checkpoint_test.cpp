#include "mpiddp/checkpoint/checkpoint.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "mpiddp/core/error.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/scratch_dir.hpp"
#include "../support/resume_experiment.hpp"

namespace mpiddp::checkpoint {
namespace {

namespace fs = std::filesystem;

using test::adam_experiment;
using train::RunResult;

RunResult train(const io::Json& user, const std::string& resume = "") {
  distributed::LocalCommunicator comm;
  return test::train_run(comm, user, resume);
}

std::vector<double> tail(const std::vector<double>& v, size_t from) {
  return std::vector<double>(v.begin() + static_cast<long>(from), v.end());
}

TEST(Checkpoint, MidEpochResumeIsBitwiseEqual) {
  const std::string dir = test::scratch_dir("ckpt_mid");
  io::Json user = adam_experiment(dir);
  config::apply_override(user, "checkpoint.every_steps=3");
  const RunResult straight = train(user);
  ASSERT_EQ(straight.steps, 16);
  // every 3 steps, plus the end of the run
  EXPECT_EQ(list_checkpoints(dir).size(), 6u);
  // Step 6 is batch 2 of epoch 2: the resumed run replays steps 7..16.
  const RunResult resumed = train(user, checkpoint_path(dir, 6));
  EXPECT_EQ(resumed.step_losses, tail(straight.step_losses, 6));
  ASSERT_EQ(resumed.epochs.size(), 3u);  // epochs 2, 3, 4
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_EQ(resumed.epochs[e].epoch, straight.epochs[e + 1].epoch);
    EXPECT_EQ(resumed.epochs[e].eval_loss, straight.epochs[e + 1].eval_loss);
  }
  EXPECT_EQ(resumed.replicas.checksum, straight.replicas.checksum);
  EXPECT_EQ(resumed.steps, 16);
}

TEST(Checkpoint, StoppedAfterTwoEpochsAndExtendedIsBitwiseEqual) {
  const std::string dir = test::scratch_dir("ckpt_extend");
  io::Json user = adam_experiment(dir);
  const RunResult straight = train(user);
  fs::remove_all(dir);
  io::Json first_half = user;
  config::apply_override(first_half, "epochs=2");
  train(first_half);  // the last epoch always gets a checkpoint
  ASSERT_EQ(list_checkpoints(dir).size(), 1u);
  const RunResult resumed = train(user, "latest");
  EXPECT_EQ(resumed.step_losses, tail(straight.step_losses, 8));
  EXPECT_EQ(resumed.epochs.back().eval_loss, straight.epochs.back().eval_loss);
  EXPECT_EQ(resumed.replicas.checksum, straight.replicas.checksum);
}

TEST(Checkpoint, LatestSkipsTemporaryAndForeignFilesAndKeepPrunes) {
  const std::string dir = test::scratch_dir("ckpt_latest");
  io::Json user = adam_experiment(dir);
  config::apply_override(user, "checkpoint.every_steps=2");
  config::apply_override(user, "checkpoint.keep=2");
  train(user);
  // Steps 2, 4, ..., 16 were written; only the newest two remain.
  EXPECT_EQ(list_checkpoints(dir), (std::vector<std::string>{checkpoint_path(dir, 14),
                                                             checkpoint_path(dir, 16)}));
  // What a kill during a write leaves behind: a temporary file, newer and half-written.
  const std::string newer = checkpoint_path(dir, 99);
  {
    std::ofstream partial(io::temporary_name(newer), std::ios::binary);
    partial << "half a checkpoint";
  }
  std::ofstream(dir + "/step-12x.safetensors") << "not ours";
  EXPECT_EQ(resolve_resume_path("latest", dir), checkpoint_path(dir, 16));
  EXPECT_EQ(resolve_resume_path(dir, ""), checkpoint_path(dir, 16));  // a directory: its newest
  config::apply_override(user, "epochs=5");
  const RunResult resumed = train(user, "latest");  // continues after step 16
  EXPECT_EQ(resumed.step_losses.size(), 4u);
  EXPECT_EQ(resumed.steps, 20);
}

TEST(Checkpoint, StaleTemporariesAreRemovedAndNamedOthersKept) {
  const std::string dir = test::scratch_dir("ckpt_stale");
  const std::string ours = io::temporary_name(checkpoint_path(dir, 7));  // ".step-…7.safetensors.tmp"
  for (const std::string& name : {ours, dir + "/.notes.tmp", dir + "/.step-12x.safetensors.tmp",
                                  checkpoint_path(dir, 5)})
    std::ofstream(name) << "x";
  EXPECT_EQ(remove_stale_temporaries(dir), std::vector<std::string>{".step-000000000007.safetensors.tmp"});
  EXPECT_FALSE(fs::exists(ours));
  EXPECT_TRUE(fs::exists(dir + "/.notes.tmp"));                  // not a checkpoint's
  EXPECT_TRUE(fs::exists(dir + "/.step-12x.safetensors.tmp"));   // nor this
  EXPECT_TRUE(fs::exists(checkpoint_path(dir, 5)));
  EXPECT_TRUE(remove_stale_temporaries(dir + "/absent").empty());
}

std::string refusal(const io::Json& user, const std::string& path, int expected_code = kExitCheckpoint) {
  try {
    train(user, path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected_code) << e.what();
    EXPECT_TRUE(e.on_every_rank()) << e.what();  // every rank refuses: a clean exit, no abort
    return e.what();
  }
  return "(no error)";
}

TEST(Checkpoint, RefusesDamagedForeignAndIncompatibleFiles) {
  const std::string dir = test::scratch_dir("ckpt_refuse");
  io::Json user = adam_experiment(dir);
  config::apply_override(user, "epochs=1");
  train(user);
  const std::string good = checkpoint_path(dir, 4);
  ASSERT_TRUE(fs::exists(good));
  io::Json longer = user;
  config::apply_override(longer, "epochs=2");

  // A flipped bit in the data section.
  const std::string flipped = dir + "/flipped.safetensors";
  fs::copy_file(good, flipped);
  {
    std::fstream f(flipped, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x7f');
  }
  EXPECT_NE(refusal(longer, flipped).find("corrupt: the data checksum does not match"),
            std::string::npos);

  // Truncated.
  const std::string cut = dir + "/cut.safetensors";
  fs::copy_file(good, cut);
  fs::resize_file(cut, fs::file_size(good) - 100);
  EXPECT_NE(refusal(longer, cut).find("truncated"), std::string::npos);

  // Another model shape.
  io::Json wider = longer;
  config::apply_override(wider, "model.layers.0.out=32");
  EXPECT_NE(refusal(wider, good).find("another model shape: the checkpoint holds "
                                      "6-linear48-tanh-linear48-tanh-linear1 but the config builds "
                                      "6-linear32-tanh-linear48-tanh-linear1"),
            std::string::npos);

  // Another config, and which key.
  io::Json faster = longer;
  config::apply_override(faster, "optimizer.lr=0.1");
  EXPECT_NE(refusal(faster, good).find("another config: optimizer.lr: 0.01 in the checkpoint, 0.1 now"),
            std::string::npos);

  // Another dtype.
  io::Json wide = longer;
  config::apply_override(wide, "dtype=float64");
  EXPECT_NE(refusal(wide, good).find("another dtype"), std::string::npos);

  // A weights file is not a checkpoint.
  const std::string weights = dir + "/weights.safetensors";
  io::Json save = user;
  config::apply_override(save, "save_weights=\"" + weights + "\"");
  config::apply_override(save, "checkpoint.dir=\"\"");
  train(save);
  EXPECT_NE(refusal(longer, weights).find("no mpiddp_checkpoint metadata"), std::string::npos);

  // Nothing left to train: a config error on epochs.
  EXPECT_NE(refusal(user, good, kExitConfig).find("has completed 1 epochs"), std::string::npos);

  // Epochs tie a cosine schedule with t_max 0 to the run length: changing them is refused.
  io::Json cosine = user;
  config::apply_override(cosine, "schedule={\"type\":\"cosine\"}");
  config::apply_override(cosine, "checkpoint.dir=\"" + dir + "/cosine\"");
  train(cosine);
  io::Json cosine_longer = cosine;
  config::apply_override(cosine_longer, "epochs=2");
  EXPECT_NE(refusal(cosine_longer, "latest").find("epochs: 1 in the checkpoint, 2 now (schedule cosine"),
            std::string::npos);
  // ...but with t_max set they may change.
  io::Json cosine_fixed = cosine;
  config::apply_override(cosine_fixed, "schedule.t_max=4");
  config::apply_override(cosine_fixed, "checkpoint.dir=\"" + dir + "/cosine_fixed\"");
  train(cosine_fixed);
  config::apply_override(cosine_fixed, "epochs=2");
  EXPECT_EQ(train(cosine_fixed, "latest").epochs.size(), 1u);
}

// Writes the checkpoint `good` again as `path` with one metadata field set to `value`: intact
// data (its checksum still matches), odd metadata.
void write_with_field(const std::string& good, const std::string& path, const char* key,
                      const io::Json& value) {
  const io::SafetensorsFile file = io::read_safetensors(good, kExitCheckpoint);
  std::vector<io::TensorToWrite> tensors;
  for (const auto& t : file.tensors())
    tensors.push_back({t.name, t.dtype, t.shape, file.data() + t.begin});
  io::Json odd = io::Json::parse(file.metadata().at("mpiddp_checkpoint"));
  odd[key] = value;
  io::write_safetensors(path, tensors, {{"mpiddp_checkpoint", odd.dump()}});
}

// Found by fuzz_checkpoint: export read the metadata's text fields with nlohmann's value(),
// which threw its type_error (not an mpiddp Error) for a number. Intact data, odd metadata.
TEST(Checkpoint, ExportRefusesMetadataFieldsOfTheWrongType) {
  const std::string dir = test::scratch_dir("ckpt_export_types");
  io::Json user = adam_experiment(dir);
  config::apply_override(user, "epochs=1");
  train(user);
  auto export_error = [&](const char* key, const io::Json& value) -> std::string {
    const std::string path = dir + "/odd.safetensors";
    write_with_field(checkpoint_path(dir, 4), path, key, value);
    try {
      export_checkpoint_weights(path, dir + "/weights.safetensors");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitCheckpoint);
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(export_error("model", 5).find("corrupt: its mpiddp_checkpoint metadata has no text "
                                          "field 'model'"),
            std::string::npos);
  EXPECT_NE(export_error("data_checksum", 1).find("no text field 'data_checksum'"),
            std::string::npos);
  EXPECT_EQ(export_error("model", "6-linear48-tanh-linear48-tanh-linear1"), "(no error)");
}

// Found by fuzz_checkpoint: resume read the position with nlohmann's get<int64_t>, which
// casts a number parsed as a double (1.9e19 is beyond 2^64) to int64_t: undefined behaviour.
// Intact data, odd metadata: every such field is refused by name.
TEST(Checkpoint, ResumeRefusesPositionFieldsThatAreNotWholeNumbers) {
  const std::string dir = test::scratch_dir("ckpt_position_types");
  io::Json user = adam_experiment(dir);
  config::apply_override(user, "epochs=1");
  train(user);
  io::Json longer = user;
  config::apply_override(longer, "epochs=2");
  auto resume_error = [&](const char* key, const io::Json& value) -> std::string {
    const std::string path = dir + "/odd.safetensors";
    write_with_field(checkpoint_path(dir, 4), path, key, value);
    return refusal(longer, path);
  };
  for (const char* key : {"epoch", "batch", "step", "optimizer_steps"}) {
    const std::string named = std::string("no integer field '") + key + "' (a whole number below 2^63)";
    EXPECT_NE(resume_error(key, 1.9223372036854775807e19).find(named), std::string::npos) << key;
    EXPECT_NE(resume_error(key, 1.5).find(named), std::string::npos) << key;
    EXPECT_NE(resume_error(key, uint64_t{1} << 63).find(named), std::string::npos) << key;
    EXPECT_NE(resume_error(key, "2").find(named), std::string::npos) << key;
  }
  // The untouched metadata resumes: the refusals above are the fields'.
  EXPECT_EQ(train(longer, checkpoint_path(dir, 4)).epochs.size(), 1u);
}

TEST(Checkpoint, ResumeConfigDropsOnlyTheKeysThatMayChange) {
  io::Json user = adam_experiment("/tmp/somewhere");
  config::apply_override(user, "log.path=\"x.jsonl\"");
  config::apply_override(user, "memory.limit_mb=9000");
  const io::Json kept = resume_config(config::parse_config(user));
  for (const char* key : {"log", "checkpoint", "save_weights", "init", "check_every_steps", "epochs", "memory"})
    EXPECT_FALSE(kept.contains(key)) << key;
  for (const char* key : {"seed", "dtype", "model", "loss", "data", "sampler", "batch", "optimizer",
                          "schedule", "sync"})
    EXPECT_TRUE(kept.contains(key)) << key;
}

TEST(Checkpoint, MissingCheckpointsAreErrors) {
  const std::string dir = test::scratch_dir("ckpt_none");
  io::Json user = adam_experiment(dir);
  EXPECT_NE(refusal(user, "latest").find("no checkpoint"), std::string::npos);
  EXPECT_NE(refusal(user, dir + "/nope.safetensors").find("cannot open"), std::string::npos);
  config::apply_override(user, "checkpoint.dir=\"\"");
  EXPECT_NE(refusal(user, "latest", kExitConfig).find("needs checkpoint.dir"), std::string::npos);
}

}  // namespace
}  // namespace mpiddp::checkpoint
