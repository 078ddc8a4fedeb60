// Checkpoints in parts without MPI: parts cut at arbitrary elements, read back by a rank whose
// part of the optimizer state is cut elsewhere, bit for bit; the index's and the parts' checks.
#include "mpiddp/checkpoint/checkpoint_parts.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "../support/layer_harness.hpp"
#include "../support/scratch_dir.hpp"

namespace mpiddp::checkpoint {
namespace {

namespace fs = std::filesystem;

// 3 -> linear 4 -> batchnorm1d -> tanh -> linear 2: 34 parameters, and BatchNorm's running
// statistics (real) and its batch counter (I64).
const std::vector<nn::LayerSpec> kSpecs = mpiddp::testing::specs(
    R"([{"type": "linear", "out": 4}, {"type": "batchnorm1d"}, {"type": "tanh"}, {"type": "linear", "out": 2}])");

optim::OptimizerConfig adam() {
  optim::OptimizerConfig config;
  config.type = "adam";
  return config;
}

RunIdentity identity_of(const nn::Model<double>& model) {
  RunIdentity identity;
  identity.model = model.describe();
  identity.dtype = "float64";
  identity.config = {{"seed", 3}};
  identity.global_batch = 4;
  identity.train_samples = 40;
  identity.steps_per_epoch = 10;
  identity.world_size = 3;
  return identity;
}

// A model and a whole Adam state with values that differ everywhere, written as the parts
// [0, 5), [5, 19), [19, P) of a checkpoint of step 13 (epoch 2, batch 3).
struct Written {
  std::string dir;
  nn::Model<double> model{{3}, kSpecs, 2};
  std::unique_ptr<optim::UpdateRule<double>> rule;
  RunIdentity identity;
  TrainingPosition position;

  explicit Written(const std::string& name, int64_t step = 13) {
    dir = parts_checkpoint_path(test::scratch_dir(name), step);
    fs::create_directories(dir);
    model.initialize(5);
    for (Index i = 0; i < model.buffer_value_count(); ++i) model.buffer_values()[i] = 0.25 * static_cast<double>(i + 1);
    for (Index i = 0; i < model.buffer_counter_count(); ++i) model.buffer_counters()[i] = 40 + i;
    rule = optim::make_update_rule<double>(adam(), model.parameter_count());
    rule->keep_average(0.9, 1);  // ema's average: a third state buffer
    double value = 1.0;
    for (auto& buffer : rule->state_buffers())
      for (double& v : *buffer.values) v = (value += 0.125);
    rule->set_steps(7);
    identity = identity_of(model);
    position.epoch = 2;
    position.batch = 3;
    position.step = step;
    const std::string id = parts_write_id(identity, dir, step, 0);
    const Index cuts[4] = {0, 5, 19, model.parameter_count()};
    std::vector<io::Json> parts;
    for (int p = 0; p < 3; ++p)
      parts.push_back(write_part(PartToWrite{dir, id, p, 3, cuts[p], cuts[p + 1], p == 0}, model, *rule, 0));
    write_parts_index(dir, id, position, identity, model, *rule, parts, nullptr);
  }
};

std::vector<char> index_of(const std::string& dir) {
  return io::read_whole_file(parts_index_path(dir), kExitCheckpoint);
}

// The Error(kExitCheckpoint) message of restoring `dir` into a fresh model, "" when it restores.
std::string refusal(const Written& w, const std::vector<char>& index) {
  nn::Model<double> model({3}, kSpecs, 2);
  auto rule = optim::make_update_rule<double>(adam(), model.parameter_count());
  rule->keep_average(0.9, 1);  // as the writer's
  try {
    PartsCheckpoint parts(w.dir, index);
    restore_parts(parts, w.identity, model, *rule, 0);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitCheckpoint) << e.what();
    return e.what();
  }
  return "";
}

TEST(CheckpointParts, ARankWhosePartIsCutElsewhereRestoresItsPartBitForBit) {
  const Written w("parts_restore");
  EXPECT_TRUE(is_parts_checkpoint(w.dir));
  ASSERT_EQ(w.model.parameter_count(), 34);  // 3·4 + 4, BatchNorm's 4 + 4, 4·2 + 2
  // A rank of another world size holding the state of [3, 23): across all three parts.
  nn::Model<double> model({3}, kSpecs, 2);
  model.initialize(99);
  auto local = optim::make_update_rule<double>(adam(), 20);
  local->keep_average(0.9, 1);
  PartsCheckpoint parts(w.dir, index_of(w.dir));
  const TrainingPosition position = restore_parts(parts, w.identity, model, *local, 3);
  EXPECT_EQ(position.epoch, 2);
  EXPECT_EQ(position.batch, 3);
  EXPECT_EQ(position.step, 13);
  EXPECT_EQ(local->steps(), 7);
  EXPECT_EQ(std::memcmp(model.parameters(), w.model.parameters(), 34 * sizeof(double)), 0);
  for (Index i = 0; i < model.buffer_value_count(); ++i) EXPECT_EQ(model.buffer_values()[i], w.model.buffer_values()[i]);
  for (Index i = 0; i < model.buffer_counter_count(); ++i)
    EXPECT_EQ(model.buffer_counters()[i], w.model.buffer_counters()[i]);
  auto whole = w.rule->state_buffers();
  auto held = local->state_buffers();
  ASSERT_EQ(held.size(), 3u);  // exp_avg, exp_avg_sq, ema
  for (size_t b = 0; b < held.size(); ++b)
    for (Index i = 0; i < 20; ++i) EXPECT_EQ((*held[b].values)[i], (*whole[b].values)[3 + i]) << held[b].name << " " << i;
}

TEST(CheckpointParts, ARankWhosePartIsEmptyRestoresTheParametersAlone) {
  // The last of many ranks over few parameters holds no state: its rule has no buffer of
  // its own (ema's average is empty), yet the checkpoint's are this run's.
  const Written w("parts_empty");
  nn::Model<double> model({3}, kSpecs, 2);
  auto local = optim::make_update_rule<double>(adam(), 0);
  local->keep_average(0.9, 1);
  PartsCheckpoint parts(w.dir, index_of(w.dir));
  restore_parts(parts, w.identity, model, *local, 34);
  EXPECT_EQ(std::memcmp(model.parameters(), w.model.parameters(), 34 * sizeof(double)), 0);
  EXPECT_EQ(local->steps(), 7);
}

TEST(CheckpointParts, TheIndexListsEachTensorsSlicesInAFileCheckpointsOrder) {
  const Written w("parts_index");
  PartsCheckpoint parts(w.dir, index_of(w.dir));
  // 0.weight [4, 3] holds elements 0..11 of the flat buffer: [0, 5) in part 0, [5, 12) in part 1.
  const auto& weight = parts.tensors().at("0.weight");
  ASSERT_EQ(weight.slices.size(), 2u);
  EXPECT_EQ(weight.slices[0].part, 0);
  EXPECT_EQ(weight.slices[0].end, 5);
  EXPECT_EQ(weight.slices[1].part, 1);
  EXPECT_EQ(weight.slices[1].begin, 5);
  EXPECT_EQ(weight.slices[1].end, 12);
  EXPECT_EQ(parts.names().front(), "0.weight");
  EXPECT_EQ(parts.names().back(), "optimizer.ema.3.bias");
  EXPECT_EQ(parts.tensors().at("1.num_batches_tracked").dtype, io::TensorDtype::kI64);
}

// The index edited as a hostile or damaged copy would be.
std::vector<char> edited(const std::string& dir, const std::function<void(io::Json&)>& edit) {
  const auto bytes = index_of(dir);
  io::Json index = io::Json::parse(bytes.begin(), bytes.end());
  edit(index);
  const std::string text = index.dump();
  return std::vector<char>(text.begin(), text.end());
}

TEST(CheckpointParts, SlicesThatOverlapOrLeaveElementsOutAreRefused) {
  const Written w("parts_slices");
  EXPECT_EQ(refusal(w, index_of(w.dir)), "");
  const std::string overlap = refusal(w, edited(w.dir, [](io::Json& i) {
    i["tensors"]["0.weight"]["slices"][1]["begin"] = 4;
  }));
  EXPECT_NE(overlap.find("tensor '0.weight': its slices [0, 5) in 'part-00000-of-00003-"), std::string::npos) << overlap;
  EXPECT_NE(overlap.find("and [4, 12) in 'part-00001-of-00003-"), std::string::npos) << overlap;
  EXPECT_NE(overlap.find("overlap"), std::string::npos) << overlap;
  const std::string gap = refusal(w, edited(w.dir, [](io::Json& i) {
    i["tensors"]["0.weight"]["slices"][1]["begin"] = 6;
  }));
  EXPECT_NE(gap.find("tensor '0.weight': its elements [5, 6) are in no part"), std::string::npos) << gap;
  const std::string short_end = refusal(w, edited(w.dir, [](io::Json& i) {
    i["tensors"]["0.weight"]["slices"][1]["end"] = 11;
  }));
  EXPECT_NE(short_end.find("tensor '0.weight': its elements [11, 12) are in no part"), std::string::npos) << short_end;
  const std::string lost = refusal(w, edited(w.dir, [](io::Json& i) { i["tensors"].erase("3.bias"); }));
  EXPECT_NE(lost.find("it lacks the tensors '3.bias'"), std::string::npos) << lost;
  const std::string beyond = refusal(w, edited(w.dir, [](io::Json& i) {
    i["tensors"]["0.weight"]["slices"][0]["part"] = 3;
  }));
  EXPECT_NE(beyond.find("corrupt: a slice of tensor '0.weight' has no integer 'part' in [0, 2]"), std::string::npos) << beyond;
}

TEST(CheckpointParts, APartOfAnotherCheckpointOrDamagedIsRefusedNamingIt) {
  const Written w("parts_hostile");
  const Written other("parts_hostile_other", 14);
  const std::vector<char> index = index_of(w.dir);
  std::vector<std::string> files;
  const io::Json parsed = io::Json::parse(index.begin(), index.end());
  for (const auto& f : parsed["parts"]) files.push_back(f.get<std::string>());
  const std::string part1 = (fs::path(w.dir) / files[1]).string();
  const std::string saved = part1 + ".saved";
  fs::copy_file(part1, saved);
  // Another checkpoint's part 1 under this one's name.
  for (const auto& entry : fs::directory_iterator(other.dir))
    if (entry.path().filename().string().rfind("part-00001-", 0) == 0)
      fs::copy_file(entry.path(), part1, fs::copy_options::overwrite_existing);
  std::string why = refusal(w, index_of(w.dir));
  EXPECT_NE(why.find("checkpoint '" + part1 + "' refused: a part of another checkpoint"), std::string::npos) << why;
  // A byte of its data changed.
  fs::copy_file(saved, part1, fs::copy_options::overwrite_existing);
  {
    std::fstream f(part1, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  why = refusal(w, index_of(w.dir));
  EXPECT_NE(why.find("checkpoint '" + part1 + "' refused: corrupt: the slice"), std::string::npos) << why;
  EXPECT_NE(why.find("does not match its checksum"), std::string::npos) << why;
  // Gone.
  fs::remove(part1);
  why = refusal(w, index_of(w.dir));
  EXPECT_NE(why.find("checkpoint '" + part1 + "' refused: a missing part"), std::string::npos) << why;
}

TEST(CheckpointParts, TheDirectoryIsACheckpointOnlyOnceItsIndexLands) {
  const Written w("parts_landing");
  const std::string dir = fs::path(w.dir).parent_path().string();
  EXPECT_EQ(list_checkpoints(dir), std::vector<std::string>{w.dir});
  const std::string killed = parts_checkpoint_path(dir, 20);
  fs::create_directories(killed);
  std::ofstream(killed + "/part-00000-of-00003-0123456789abcdef.safetensors") << "a part";
  EXPECT_EQ(list_checkpoints(dir), std::vector<std::string>{w.dir});
  EXPECT_EQ(resolve_resume_path("latest", dir), w.dir);
  EXPECT_EQ(resolve_resume_path(w.dir, ""), w.dir);
  // The killed write, and a file beside the parts its index names, are cleared at start.
  std::ofstream(w.dir + "/part-00009-of-00010-0123456789abcdef.safetensors") << "an earlier best's part";
  const auto removed = remove_stale_temporaries(dir);
  EXPECT_EQ(removed, (std::vector<std::string>{"step-000000000013.parts/part-00009-of-00010-0123456789abcdef.safetensors",
                                               "step-000000000020.parts/"}));
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_EQ(refusal(w, index_of(w.dir)), "");
}

TEST(CheckpointParts, ExportAssemblesTheWeightsAsAFileCheckpointsExportDoes) {
  const Written w("parts_export");
  const std::string weights = fs::path(w.dir).parent_path().string() + "/weights.safetensors";
  EXPECT_EQ(export_checkpoint_weights(w.dir, weights), 9u);  // 6 parameters, 3 buffers
  const io::SafetensorsFile file = io::read_safetensors(weights, kExitCheckpoint);
  ASSERT_EQ(file.tensors().size(), 9u);
  EXPECT_EQ(file.tensors()[0].name, "0.weight");
  EXPECT_EQ(file.tensors()[0].shape, (std::vector<int64_t>{4, 3}));
  std::vector<double> values(12);
  file.read(file.tensors()[0], values.data());
  EXPECT_EQ(std::memcmp(values.data(), w.model.parameters(), 12 * sizeof(double)), 0);
  EXPECT_EQ(file.metadata().at("exported_from"), w.dir);
}

}  // namespace
}  // namespace mpiddp::checkpoint
