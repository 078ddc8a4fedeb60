#include "mpiddp/checkpoint/weights.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "mpiddp/core/error.hpp"
#include "mpiddp/core/hash.hpp"
#include "mpiddp/distributed/local_communicator.hpp"
#include "mpiddp/train/trainer.hpp"
#include "../support/layer_harness.hpp"
#include "../support/scratch_dir.hpp"

namespace mpiddp::train {
namespace {

// 3 -> linear 2 -> tanh -> linear 1: PyTorch's nn.Sequential(Linear(3,2), Tanh(), Linear(2,1)),
// whose state_dict names are 0.weight [2,3], 0.bias [2], 2.weight [1,2], 2.bias [1].
const std::vector<nn::LayerSpec> kSpecs = mpiddp::testing::specs(
    R"([{"type": "linear", "out": 2}, {"type": "tanh"}, {"type": "linear", "out": 1}])");

// The state_dict as PyTorch writes it: F64, weights row-major [out, in].
void write_torch_fixture(const std::string& path) {
  const double w0[6] = {1.0, 0.0, -1.0,   // row 0: output 0
                        0.5, 0.5, 0.0};   // row 1: output 1
  const double b0[2] = {0.5, -1.0};
  const double w2[2] = {2.0, -1.0};
  const double b2[1] = {0.25};
  io::write_safetensors(path,
                        {{"2.bias", io::TensorDtype::kF64, {1}, b2},
                         {"0.weight", io::TensorDtype::kF64, {2, 3}, w0},
                         {"2.weight", io::TensorDtype::kF64, {1, 2}, w2},
                         {"0.bias", io::TensorDtype::kF64, {2}, b0}},
                        {{"format", "pt"}});
}

template <typename T>
double forward_one(nn::Model<T>& model, const T (&x)[3]) {
  return static_cast<double>(model.forward(ConstMatrixView<T>(x, 3, 1))(0, 0));
}

TEST(Weights, PyTorchStateDictLoadsWithItsLayout) {
  const std::string dir = test::scratch_dir("weights_torch");
  write_torch_fixture(dir + "/torch.safetensors");
  nn::Model<double> model({3}, kSpecs, 1);
  checkpoint::load_weights(dir + "/torch.safetensors", model);
  // x = (1, 2, 3): W0 x + b0 = (1 - 3 + 0.5, 0.5 + 1 - 1) = (-1.5, 0.5);
  // y = 2 tanh(-1.5) - tanh(0.5) + 0.25.
  const double x[3] = {1, 2, 3};
  EXPECT_DOUBLE_EQ(forward_one(model, x), 2 * std::tanh(-1.5) - std::tanh(0.5) + 0.25);

  // The same F64 file into a float32 model converts each value.
  nn::Model<float> single({3}, kSpecs, 1);
  checkpoint::load_weights(dir + "/torch.safetensors", single);
  const float xf[3] = {1, 2, 3};
  EXPECT_NEAR(forward_one(single, xf), 2 * std::tanh(-1.5) - std::tanh(0.5) + 0.25, 1e-6);
}

TEST(Weights, SavedWeightsCarryPyTorchNamesAndReloadExactly) {
  const std::string dir = test::scratch_dir("weights_save");
  nn::Model<float> model({3}, kSpecs, 1);
  model.initialize(7);
  checkpoint::save_weights(dir + "/w.safetensors", model);
  const io::SafetensorsFile file = io::read_safetensors(dir + "/w.safetensors", kExitData);
  ASSERT_EQ(file.tensors().size(), 4u);
  EXPECT_EQ(file.find("0.weight")->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(file.find("2.weight")->shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(file.find("2.bias")->dtype, io::TensorDtype::kF32);
  nn::Model<float> copy({3}, kSpecs, 1);
  checkpoint::load_weights(dir + "/w.safetensors", copy);
  EXPECT_EQ(std::memcmp(copy.parameters(), model.parameters(), model.parameter_count() * sizeof(float)), 0);
}

TEST(Weights, BatchNormBuffersTravelAsAStateDictWithAnI64Counter) {
  const std::string dir = test::scratch_dir("weights_buffers");
  const auto specs = mpiddp::testing::specs(R"([{"type": "conv2d", "out": 2, "kernel": 1},
      {"type": "batchnorm2d"}, {"type": "flatten"}, {"type": "linear", "out": 1}])");
  nn::Model<double> model({1, 2, 2}, specs, 4);
  model.initialize(3);
  // One training pass moves the running statistics off their start and counts a batch.
  const double x[16] = {1, 2, 3, 4, -1, 0, 2, 5, 0.5, 0.25, 3, -2, 1, 1, 1, 2};
  model.forward(ConstMatrixView<double>(x, 4, 4));
  ASSERT_EQ(model.buffer_counters()[0], 1);
  checkpoint::save_weights(dir + "/w.safetensors", model);
  const io::SafetensorsFile file = io::read_safetensors(dir + "/w.safetensors", kExitData);
  ASSERT_EQ(file.tensors().size(), 9u);  // 2 conv, 2 + 3 batchnorm, 2 linear
  EXPECT_EQ(file.find("1.running_mean")->dtype, io::TensorDtype::kF64);
  EXPECT_EQ(file.find("1.num_batches_tracked")->dtype, io::TensorDtype::kI64);
  EXPECT_TRUE(file.find("1.num_batches_tracked")->shape.empty());
  nn::Model<double> copy({1, 2, 2}, specs, 4);
  checkpoint::load_weights(dir + "/w.safetensors", copy);
  EXPECT_EQ(std::memcmp(copy.buffer_values(), model.buffer_values(),
                        static_cast<size_t>(model.buffer_value_count()) * sizeof(double)), 0);
  EXPECT_EQ(copy.buffer_counters()[0], 1);
  EXPECT_NE(model.buffer_values()[0], 0.0);  // running_mean moved: the comparison means something
  // A weights file without the buffers does not fit a model that has them (strict loading).
  io::write_safetensors(dir + "/params.safetensors", checkpoint::named_tensors(model.tensors(), model.parameters()), {});
  try {
    checkpoint::load_weights(dir + "/params.safetensors", copy);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'1.running_var' [2] is missing"), std::string::npos) << e.what();
  }
}

// A GPT's head tied to its token embedding (tests/nn/tied_linear_test.cpp): "3.weight" is
// "0.weight" [5, 4], and a state_dict holds both names.
const std::vector<nn::LayerSpec> kTiedSpecs = mpiddp::testing::specs(
    R"([{"type": "embedding", "vocab": 5, "dim": 4}, {"type": "position_embedding", "positions": 3},
        {"type": "layernorm"}, {"type": "linear", "out": 5, "bias": false, "tied_to": "0.weight"}])");

template <typename T>
std::vector<T> stored(const io::SafetensorsFile& file, const std::string& name) {
  const io::StoredTensor* tensor = file.find(name);
  EXPECT_NE(tensor, nullptr) << name;
  if (!tensor) return {};
  std::vector<T> values(static_cast<size_t>(tensor->elements()));
  file.read(*tensor, values.data());
  return values;
}

TEST(Weights, ATiedTensorIsSavedUnderBothNamesEqualAndLoadsBack) {
  const std::string dir = test::scratch_dir("weights_tied");
  nn::Model<float> model({3}, kTiedSpecs, 1);
  model.initialize(7);
  checkpoint::save_weights(dir + "/tied.safetensors", model);
  const io::SafetensorsFile file = io::read_safetensors(dir + "/tied.safetensors", kExitData);
  // 0.weight, 1.weight, 2.weight, 2.bias, and 3.weight: the head's second name.
  ASSERT_EQ(file.tensors().size(), 5u);
  ASSERT_NE(file.find("3.weight"), nullptr);
  EXPECT_EQ(file.find("3.weight")->shape, (std::vector<int64_t>{5, 4}));
  EXPECT_EQ(file.find("3.weight")->dtype, io::TensorDtype::kF32);
  const std::vector<float> table(model.parameters(), model.parameters() + 20);
  EXPECT_EQ(stored<float>(file, "0.weight"), table);
  EXPECT_EQ(stored<float>(file, "3.weight"), table);
  nn::Model<float> copy({3}, kTiedSpecs, 1);
  checkpoint::load_weights(dir + "/tied.safetensors", copy);
  EXPECT_EQ(std::memcmp(copy.parameters(), model.parameters(), model.parameter_count() * sizeof(float)), 0);
  // The float64 file of the same model into a float32 one: both names convert alike.
  nn::Model<double> wide({3}, kTiedSpecs, 1);
  wide.initialize(7);
  checkpoint::save_weights(dir + "/wide.safetensors", wide);
  EXPECT_NO_THROW(checkpoint::load_weights(dir + "/wide.safetensors", copy));
}

TEST(Weights, ATiedTensorsSecondNameMustHoldItsValuesOrBeLeftOut) {
  const std::string dir = test::scratch_dir("weights_tied_other");
  nn::Model<double> model({3}, kTiedSpecs, 1);
  model.initialize(7);
  const std::vector<io::TensorToWrite> own = checkpoint::named_tensors(model.tensors(), model.parameters());
  std::vector<double> other(model.parameters(), model.parameters() + 20);
  other[7] += 1e-3;
  std::vector<io::TensorToWrite> two_models = own;
  two_models.push_back({"3.weight", io::TensorDtype::kF64, {5, 4}, other.data()});
  io::write_safetensors(dir + "/two.safetensors", two_models, {});
  nn::Model<double> copy({3}, kTiedSpecs, 1);
  try {
    checkpoint::load_weights(dir + "/two.safetensors", copy);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData);
    const std::string message = e.what();
    EXPECT_NE(message.find("init.weights: '" + dir + "/two.safetensors': tensor '3.weight' is tied to '0.weight' in the "
                           "model, but the file holds other values under the two names"),
              std::string::npos)
        << message;
  }
  // Of another shape: the shape is named.
  std::vector<io::TensorToWrite> transposed = own;
  transposed.push_back({"3.weight", io::TensorDtype::kF64, {4, 5}, model.parameters()});
  io::write_safetensors(dir + "/transposed.safetensors", transposed, {});
  try {
    checkpoint::load_weights(dir + "/transposed.safetensors", copy);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor '3.weight' has shape [4, 5] in the file but the model needs [5, 4]"),
              std::string::npos)
        << e.what();
  }
  // Left out, as safetensors' save_model keeps one name of shared tensors: it loads.
  io::write_safetensors(dir + "/one_name.safetensors", own, {});
  nn::Model<double> from_one({3}, kTiedSpecs, 1);
  checkpoint::load_weights(dir + "/one_name.safetensors", from_one);
  EXPECT_EQ(std::memcmp(from_one.parameters(), model.parameters(), model.parameter_count() * sizeof(double)), 0);
}

std::string init_error(const std::string& weights_path, int* code) {
  io::Json user = config::default_experiment();
  config::apply_override(user, "init.weights=\"" + weights_path + "\"");
  distributed::LocalCommunicator comm;
  try {
    run_training(config::parse_config(user), comm, {.quiet = true});
  } catch (const Error& e) {
    EXPECT_TRUE(e.on_every_rank()) << e.what();
    *code = e.code();
    return e.what();
  }
  return "(no error)";
}

TEST(Weights, InitWeightsErrorsNameTheTensorAndBothShapes) {
  const std::string dir = test::scratch_dir("weights_errors");
  // The default model, 6 -> 48 -> tanh -> 48 -> tanh -> 1, has these tensors (values unused).
  std::vector<float> zeros(48 * 48, 0.0f);
  std::vector<io::TensorToWrite> fitting;
  for (const auto& [name, shape] : std::vector<std::pair<std::string, std::vector<int64_t>>>{
           {"0.weight", {48, 6}}, {"0.bias", {48}}, {"2.weight", {48, 48}}, {"2.bias", {48}},
           {"4.weight", {1, 48}}, {"4.bias", {1}}})
    fitting.push_back({name, io::TensorDtype::kF32, shape, zeros.data()});
  const io::TensorToWrite extra{"6.weight", io::TensorDtype::kF32, {1, 1}, zeros.data()};

  auto narrow = fitting;  // layer 2 too narrow
  narrow[2].shape = {40, 48};
  io::write_safetensors(dir + "/bad.safetensors", narrow, {});
  int code = 0;
  std::string message = init_error(dir + "/bad.safetensors", &code);
  EXPECT_EQ(code, kExitData);
  EXPECT_NE(message.find("init.weights"), std::string::npos) << message;
  EXPECT_NE(message.find("tensor '2.weight' has shape [40, 48] in the file but the model needs [48, 48]"),
            std::string::npos)
      << message;

  io::write_safetensors(dir + "/missing.safetensors", {fitting[0]}, {});
  message = init_error(dir + "/missing.safetensors", &code);
  EXPECT_NE(message.find("tensor '0.bias' [48] is missing"), std::string::npos) << message;
  EXPECT_NE(message.find("tensor '4.weight' [1, 48] is missing"), std::string::npos) << message;

  auto with_extra = fitting;
  with_extra.push_back(extra);
  io::write_safetensors(dir + "/extra.safetensors", with_extra, {});
  message = init_error(dir + "/extra.safetensors", &code);
  EXPECT_NE(message.find("tensors the model does not have: '6.weight' [1, 1]"), std::string::npos)
      << message;

  message = init_error(dir + "/absent.safetensors", &code);
  EXPECT_EQ(code, kExitData);
  EXPECT_NE(message.find("cannot open '" + dir + "/absent.safetensors'"), std::string::npos) << message;
}

TEST(Weights, TrainingStartsFromInitWeights) {
  // Saving the seeded initialisation and starting from it reproduces the seeded run bit
  // for bit: init.weights replaces exactly the initialisation, nothing else.
  const std::string dir = test::scratch_dir("weights_start");
  distributed::LocalCommunicator comm;
  const config::Config plain = config::parse_config(config::default_experiment());
  Trainer<float> reference(plain, comm, {.quiet = true});
  reference.model().initialize(plain.seed);
  checkpoint::save_weights(dir + "/init.safetensors", reference.model());

  io::Json user = config::default_experiment();
  config::apply_override(user, "init.weights=\"" + dir + "/init.safetensors\"");
  config::apply_override(user, "save_weights=\"" + dir + "/final.safetensors\"");
  const RunResult from_file = run_training(config::parse_config(user), comm, {.quiet = true});
  const RunResult seeded = run_training(plain, comm, {.quiet = true});
  EXPECT_EQ(from_file.step_losses, seeded.step_losses);
  EXPECT_EQ(from_file.replicas.checksum, seeded.replicas.checksum);
  // save_weights wrote the final parameters: their checksum is the run's.
  nn::Model<float> final_model({6}, plain.layers, 1);
  checkpoint::load_weights(dir + "/final.safetensors", final_model);
  EXPECT_EQ(hex64(fnv1a(final_model.parameters(), final_model.parameter_count() * sizeof(float))),
            seeded.replicas.checksum);
}

}  // namespace
}  // namespace mpiddp::train
