#include "mpiddp/config/config.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/nn/linear.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <utility>

#include "../support/config_errors.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::config {
namespace {

using test::override_error_key;

TEST(Config, DefaultExperimentResolves) {
  const Config c = parse_config(default_experiment());
  EXPECT_EQ(c.dtype, "float32");
  EXPECT_EQ(c.layers.size(), 5u);
  EXPECT_EQ(std::any_cast<const nn::LinearOptions&>(c.layers[2].options).out, 48);
  EXPECT_EQ(c.train_data.synthetic.samples, 256);
  EXPECT_DOUBLE_EQ(c.train_data.synthetic.noise, 0.1);
  EXPECT_EQ(c.batch_global, 64);
  EXPECT_EQ(c.per_rank_batch(4), 16);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.03);
  EXPECT_EQ(c.epochs, 4);
  EXPECT_TRUE(c.shuffle);
  EXPECT_TRUE(c.sync);
  // The resolved config holds every default, so a log says exactly what ran.
  EXPECT_EQ(c.resolved["optimizer"]["momentum"], 0.0);
  EXPECT_EQ(c.resolved["sampler"]["drop_last"], false);
  EXPECT_EQ(c.resolved["log"]["every_steps"], 1);
}

TEST(Config, OverridesReachNestedKeysAndListItems) {
  io::Json user = default_experiment();
  apply_override(user, "optimizer.lr=0.1");
  apply_override(user, "model.layers.0.out=64");
  apply_override(user, "model.layers[2].out=32");
  apply_override(user, "dtype=float64");  // a bare word is a string
  apply_override(user, "optimizer.type=\"adam\"");
  const Config c = parse_config(user);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.1);
  EXPECT_EQ(std::any_cast<const nn::LinearOptions&>(c.layers[0].options).out, 64);
  EXPECT_EQ(std::any_cast<const nn::LinearOptions&>(c.layers[2].options).out, 32);
  EXPECT_EQ(c.dtype, "float64");
  EXPECT_EQ(c.optimizer.type, "adam");
}

TEST(Config, EachErrorNamesItsKey) {
  EXPECT_EQ(override_error_key("bogus=1"), "bogus");
  EXPECT_EQ(override_error_key("optimizer.lrr=0.1"), "optimizer.lrr");
  EXPECT_EQ(override_error_key("optimizer.lr=\"fast\""), "optimizer.lr");
  EXPECT_EQ(override_error_key("optimizer.lr=-1"), "optimizer.lr");
  EXPECT_EQ(override_error_key("optimizer.type=rmsprop"), "optimizer.type");
  EXPECT_EQ(override_error_key("optimizer.momentum=0.9"), "(no error)");
  EXPECT_EQ(override_error_key("optimizer.dampening=2"), "optimizer.dampening");
  EXPECT_EQ(override_error_key("epochs=0"), "epochs");
  EXPECT_EQ(override_error_key("epochs=2.5"), "epochs");
  EXPECT_EQ(override_error_key("dtype=float16"), "dtype");
  EXPECT_EQ(override_error_key("loss=hinge"), "loss");
  EXPECT_EQ(override_error_key("sync=1"), "sync");
  EXPECT_EQ(override_error_key("model.layers.1.type=softplus"), "model.layers[1].type");
  EXPECT_EQ(override_error_key("model.layers.0.out=0"), "model.layers[0].out");
  EXPECT_EQ(override_error_key("model.layers=[]"), "model.layers");
  EXPECT_EQ(override_error_key("data.train.source=mnist"), "data.train.source");
  EXPECT_EQ(override_error_key("data.train.samples=-5"), "data.train.samples");
  EXPECT_EQ(override_error_key("batch.per_rank=8"), "batch");  // both global and per_rank
  EXPECT_EQ(override_error_key("batch.global=63"), "batch.global");  // not divisible by 2 ranks
  EXPECT_EQ(override_error_key("schedule.type=step"), "(no error)");
  EXPECT_EQ(override_error_key("schedule.step_size=0"), "schedule.step_size");
  EXPECT_EQ(override_error_key("log.every_steps=0"), "log.every_steps");
  EXPECT_EQ(override_error_key("model.layers.9.out=3"), "model.layers.9.out");  // past the end
}

TEST(Config, GemmLibraryIsChosenOrMeasured) {
  EXPECT_EQ(parse_config(default_experiment()).gemm, "auto");
  EXPECT_EQ(override_error_key("compute.gemm=mkl"), "compute.gemm");
  EXPECT_EQ(override_error_key("compute.gemm=eigen"), "(no error)");
  EXPECT_EQ(override_error_key("compute.threads=2"), "compute.threads");
  // Deterministic mode takes any library built in, as named (auto is Eigen there).
  io::Json user = default_experiment();
  apply_override(user, "deterministic={\"chunks\": 16}");
  for (kernels::GemmBackend b : kernels::available_gemm_backends()) {
    io::Json u = user;
    apply_override(u, std::string("compute.gemm=") + kernels::gemm_backend_name(b));
    EXPECT_EQ(parse_config(u).gemm, kernels::gemm_backend_name(b));
  }
}

TEST(Config, AdamKeysAreNotSgdKeys) {
  io::Json user = default_experiment();
  apply_override(user, "optimizer={\"type\":\"adam\",\"momentum\":0.9}");
  try {
    parse_config(user);
    FAIL() << "momentum is not an adam key";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key_path(), "optimizer.momentum");
  }
}

// The key path and message of the ConfigError the default experiment with this override gives.
std::pair<std::string, std::string> override_error(const std::string& assignment) {
  io::Json user = default_experiment();
  apply_override(user, assignment);
  try {
    parse_config(user);
  } catch (const ConfigError& e) {
    return {e.key_path(), e.what()};
  }
  return {"(no error)", ""};
}

TEST(Config, EvaluationEarlyStoppingKeepBestAndLogFormats) {
  // Absent: evaluations per epoch only, no early stopping, no best checkpoint, no CSV or
  // TensorBoard, and none of the keys in the resolved config (or its hash).
  const Config plain = parse_config(default_experiment());
  EXPECT_EQ(plain.eval.every_steps, 0);
  EXPECT_EQ(plain.eval.max_samples, 0);
  EXPECT_FALSE(plain.early_stopping.enabled());
  EXPECT_EQ(plain.checkpoint.keep_best, "");
  EXPECT_EQ(plain.log_csv, "");
  EXPECT_EQ(plain.log_tensorboard, "");
  EXPECT_EQ(plain.optimizer.ema_decay, 0.0);
  for (const char* key : {"eval", "early_stopping", "ema"}) EXPECT_FALSE(plain.resolved.contains(key)) << key;
  EXPECT_FALSE(plain.resolved["checkpoint"].contains("keep_best"));
  EXPECT_FALSE(plain.resolved["log"].contains("csv"));

  io::Json user = default_experiment();
  apply_override(user, "eval={\"every_steps\":5,\"max_samples\":100}");
  apply_override(user, "early_stopping={\"patience\":4}");
  apply_override(user, "checkpoint={\"dir\":\"ck\",\"keep_best\":\"eval_accuracy\"}");
  apply_override(user, "log={\"csv\":\"run.csv\",\"tensorboard\":\"tb\"}");
  apply_override(user, "ema={\"decay\":0.999}");
  const Config c = parse_config(user);
  EXPECT_EQ(c.optimizer.ema_decay, 0.999);
  EXPECT_EQ(c.optimizer.ema_every_steps, 1);
  EXPECT_EQ(c.eval.every_steps, 5);
  EXPECT_EQ(c.eval.max_samples, 100);
  EXPECT_EQ(c.early_stopping.metric, "eval_loss");  // the defaults of a given section
  EXPECT_EQ(c.early_stopping.patience, 4);
  EXPECT_EQ(c.early_stopping.min_delta, 0.0);
  EXPECT_EQ(c.checkpoint.keep_best, "eval_accuracy");
  EXPECT_EQ(c.log_csv, "run.csv");
  EXPECT_EQ(c.log_tensorboard, "tb");
  EXPECT_EQ(c.resolved["early_stopping"]["patience"], 4);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {"eval.every_steps=-1", "eval.every_steps"},
      {"eval.max_samples=-3", "eval.max_samples"},
      {"eval.often=1", "eval.often"},
      {"early_stopping.patience=0", "early_stopping.patience"},
      {"early_stopping.min_delta=-0.1", "early_stopping.min_delta"},
      {"early_stopping.metric=train_loss", "early_stopping.metric"},
      {"checkpoint.keep_best=eval_loss", "checkpoint.keep_best"},  // no checkpoint.dir
      {"checkpoint={\"dir\":\"ck\",\"keep_best\":\"loss\"}", "checkpoint.keep_best"},
      {"log.csv=7", "log.csv"},
      {"ema.decay=1", "ema.decay"},
      {"ema.decay=-0.5", "ema.decay"},
      {"ema.every_steps=0", "ema.every_steps"}};
  for (const auto& [assignment, key] : bad) EXPECT_EQ(override_error(assignment).first, key) << assignment;
  EXPECT_NE(override_error("checkpoint.keep_best=eval_loss").second.find("set checkpoint.dir"), std::string::npos);
  EXPECT_NE(override_error("early_stopping.metric=train_loss").second.find("\"eval_accuracy\""), std::string::npos);
}

TEST(Config, OptimizerDecayAndClipGradNorm) {
  // Absent: decay on every tensor, no clipping, and neither key in the resolved config, which
  // (and whose hash) stays what it was before they existed.
  const Config plain = parse_config(default_experiment());
  EXPECT_EQ(plain.optimizer.decay, optim::DecayRule::kAll);
  EXPECT_EQ(plain.optimizer.clip_grad_norm, 0.0);
  EXPECT_FALSE(plain.resolved["optimizer"].contains("decay"));
  EXPECT_FALSE(plain.resolved["optimizer"].contains("clip_grad_norm"));

  io::Json user = default_experiment();
  apply_override(user, "optimizer.decay=matrices");
  apply_override(user, "optimizer.clip_grad_norm=1.5");
  const Config gpt = parse_config(user);
  EXPECT_EQ(gpt.optimizer.decay, optim::DecayRule::kMatrices);
  EXPECT_EQ(gpt.optimizer.clip_grad_norm, 1.5);
  EXPECT_EQ(gpt.resolved["optimizer"]["decay"], "matrices");
  EXPECT_EQ(gpt.resolved["optimizer"]["clip_grad_norm"], 1.5);
  EXPECT_NE(config_hash(gpt), config_hash(plain));
  apply_override(user, "optimizer.decay=all");
  apply_override(user, "optimizer.clip_grad_norm=0");  // 0: off
  EXPECT_EQ(parse_config(user).optimizer.decay, optim::DecayRule::kAll);
  EXPECT_EQ(parse_config(user).optimizer.clip_grad_norm, 0.0);

  auto [key, message] = override_error("optimizer.decay=none");
  EXPECT_EQ(key, "optimizer.decay");
  EXPECT_NE(message.find("unknown value \"none\"; expected one of \"all\", \"matrices\""), std::string::npos)
      << message;
  EXPECT_EQ(override_error("optimizer.decay=2").first, "optimizer.decay");
  std::tie(key, message) = override_error("optimizer.clip_grad_norm=-1");
  EXPECT_EQ(key, "optimizer.clip_grad_norm");
  EXPECT_NE(message.find("expected a number >= 0, got -1"), std::string::npos) << message;
  EXPECT_EQ(override_error("optimizer.clip_grad_norm=\"big\"").first, "optimizer.clip_grad_norm");
  // Both keys are every optimizer's.
  EXPECT_EQ(override_error("optimizer={\"type\":\"adamw\",\"decay\":\"matrices\",\"clip_grad_norm\":1}").first,
            "(no error)");
}

TEST(Config, HashIgnoresTheLogPathOnly) {
  io::Json a = default_experiment(), b = default_experiment(), c = default_experiment();
  apply_override(b, "log.path=\"/tmp/other.jsonl\"");
  apply_override(c, "optimizer.lr=0.031");
  EXPECT_EQ(config_hash(parse_config(a)), config_hash(parse_config(b)));
  EXPECT_NE(config_hash(parse_config(a)), config_hash(parse_config(c)));
}

// reduce.shard names the mode; reduce.shard_optimizer stays the older spelling of "optimizer";
// both at once, and reduce.shard_unit "layer" (not built yet), are exit 2 naming the key. Neither key, nor
// memory.limit_mb, enters the resolved config unless given (old configs keep their hash).
TEST(Config, ReduceShardAndItsOlderSpelling) {
  const auto with_override = [](const std::string& assignment) {
    io::Json user = default_experiment();
    apply_override(user, assignment);
    return user;
  };
  EXPECT_FALSE(parse_config(default_experiment()).reduce.shard_optimizer);
  EXPECT_TRUE(parse_config(with_override("reduce.shard=\"optimizer\"")).reduce.shard_optimizer);
  EXPECT_TRUE(parse_config(with_override("reduce.shard_optimizer=true")).reduce.shard_optimizer);
  EXPECT_FALSE(parse_config(with_override("reduce.shard=\"none\"")).reduce.shard_optimizer);
  EXPECT_EQ(override_error_key("reduce.shard=\"zero1\""), "reduce.shard");
  // "gradients" (ZeRO-2) cuts the optimizer's state with the gradients.
  const Config gradients = parse_config(with_override("reduce.shard=\"gradients\""));
  EXPECT_TRUE(gradients.reduce.shard_optimizer);
  EXPECT_TRUE(gradients.reduce.shard_gradients);
  EXPECT_FALSE(parse_config(with_override("reduce.shard=\"optimizer\"")).reduce.shard_gradients);
  // "parameters" (ZeRO-3) cuts the parameters too, gathered a unit at a time: reduce.shard_unit
  // "block" (the default); "layer" is not built, and the key is for "parameters" alone.
  const Config parameters = parse_config(with_override("reduce.shard=\"parameters\""));
  EXPECT_TRUE(parameters.reduce.shard_optimizer);
  EXPECT_TRUE(parameters.reduce.shard_gradients);
  EXPECT_TRUE(parameters.reduce.shard_parameters);
  EXPECT_EQ(parameters.reduce.shard_unit, "block");
  EXPECT_FALSE(gradients.reduce.shard_parameters);
  EXPECT_EQ(parse_config(with_override("reduce.shard=\"parameters\"")).resolved["reduce"].contains("shard_unit"), false);
  EXPECT_EQ(test::overrides_error_key({"reduce.shard=\"parameters\"", "reduce.shard_unit=\"layer\""}),
            "reduce.shard_unit");
  EXPECT_EQ(test::overrides_error_key({"reduce.shard=\"parameters\"", "reduce.shard_unit=\"tensor\""}),
            "reduce.shard_unit");
  EXPECT_EQ(test::overrides_error_key({"reduce.shard=\"gradients\"", "reduce.shard_unit=\"block\""}),
            "reduce.shard_unit");
  EXPECT_EQ(test::overrides_error_key({"reduce.shard=\"optimizer\"", "reduce.shard_optimizer=true"}),
            "reduce.shard_optimizer");
  const Config plain = parse_config(default_experiment());
  EXPECT_FALSE(plain.resolved["reduce"].contains("shard"));
  EXPECT_FALSE(plain.resolved.contains("memory"));
  EXPECT_EQ(plain.memory_limit_mb, 0.0);
  const Config limited = parse_config(with_override("memory.limit_mb=512"));
  EXPECT_EQ(limited.memory_limit_mb, 512.0);
  EXPECT_EQ(limited.resolved["memory"]["limit_mb"], 512.0);
  EXPECT_EQ(override_error_key("memory.limit_mb=0"), "memory.limit_mb");
  EXPECT_EQ(override_error_key("memory.limit_mb=\"8G\""), "memory.limit_mb");
  EXPECT_EQ(override_error_key("memory.limit=100"), "memory.limit");
}

TEST(Config, InputShapeComesFromTheKeyTheInputsOrTheData) {
  io::Json user = default_experiment();
  Config c = parse_config(user);
  // model.inputs 6 and flat data of 6 features.
  EXPECT_EQ(model_input_shape(c, {}, 6, "data.train"), (nn::Shape{6}));
  apply_override(user, "model.inputs=0");
  c = parse_config(user);
  EXPECT_EQ(model_input_shape(c, {1, 28, 28}, 784, "data.train"), (nn::Shape{1, 28, 28}));
  apply_override(user, "model.input_shape=[1,28,28]");
  c = parse_config(user);
  EXPECT_EQ(c.resolved["model"]["input_shape"], io::Json::parse("[1, 28, 28]"));
  EXPECT_EQ(model_input_shape(c, {}, 784, "data.train"), (nn::Shape{1, 28, 28}));  // flat csv as images
  EXPECT_EQ(model_input_shape(c, {28, 28}, 784, "data.train"), (nn::Shape{1, 28, 28}));  // npy [N, 28, 28]
  auto key_of = [&](const std::vector<Index>& data_shape, Index features) {
    try {
      model_input_shape(c, data_shape, features, "data.train");
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("data.train"), std::string::npos) << e.what();
      return e.key_path();
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(key_of({}, 780), "model.input_shape");          // another size
  EXPECT_EQ(key_of({4, 14, 14}, 784), "model.input_shape");  // the same size, another shape
  EXPECT_EQ(override_error_key("model.input_shape=[1,0,28]"), "model.input_shape");
  EXPECT_EQ(override_error_key("model.input_shape=[1,2,3,4]"), "model.input_shape");
  EXPECT_EQ(override_error_key("model.input_shape=\"big\""), "model.input_shape");
}

}  // namespace
}  // namespace mpiddp::config
