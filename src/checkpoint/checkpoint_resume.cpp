// The resume rules: which config keys may change on resume (Note [what may change on
// resume]), and whether a checkpoint's run is this run, at what position it resumes.
#include <algorithm>
#include <string>
#include <vector>

#include "checkpoint_metadata.hpp"
#include "mpiddp/nn/residual.hpp"

namespace mpiddp::checkpoint {

namespace {

// "/optimizer/lr" -> "optimizer.lr"
std::string dotted(const std::string& pointer) {
  std::string key = pointer.substr(pointer.empty() ? 0 : 1);
  std::replace(key.begin(), key.end(), '/', '.');
  return key;
}

// The keys whose values differ, as "key: A in the checkpoint, B now" (the first three).
std::string config_differences(const io::Json& saved, const io::Json& now) {
  const io::Json a = saved.flatten(), b = now.flatten();
  std::vector<std::string> lines;
  auto value_of = [](const io::Json& flat, const std::string& key) {
    return flat.contains(key) ? flat[key].dump() : std::string("(absent)");
  };
  io::Json keys = io::Json::object();
  for (auto it = a.begin(); it != a.end(); ++it) keys[it.key()] = true;
  for (auto it = b.begin(); it != b.end(); ++it) keys[it.key()] = true;
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const std::string va = value_of(a, it.key()), vb = value_of(b, it.key());
    if (va != vb) lines.push_back(dotted(it.key()) + ": " + va + " in the checkpoint, " + vb + " now");
  }
  std::string text;
  for (size_t i = 0; i < lines.size() && i < 3; ++i) text += (i ? "; " : "") + lines[i];
  if (lines.size() > 3) text += "; and " + std::to_string(lines.size() - 3) + " more";
  return text;
}

bool cosine_spans_run(const config::Config& config) {
  return config.schedule.type == "cosine" && config.schedule.t_max == 0;
}

}  // namespace

io::Json resume_config(const config::Config& config) {
  io::Json kept = config.resolved;
  // Note [what may change on resume]: these keys do not change the sequence of parameter
  // updates, so a resumed run may set them anew: how long to train (epochs), where to log
  // and checkpoint, where to save the final weights, how the run started (init: the
  // parameters now come from the checkpoint) and how often replicas are compared. Anything
  // else (model, data, sampler, batch, optimizer, schedule, seed, dtype, sync) must match.
  // A cosine schedule with t_max 0 spans the whole run, so there epochs shapes every lr.
  // Fault policies, the watchdog, fault injection, threads, prefetch and the reduction path change
  // how a run is watched or spread over cores, not its updates (beyond float rounding, as
  // another world size does), so they may change too. When and how much it evaluates, and
  // when it stops early, change which updates run, not what any of them is. A residual's
  // recompute changes what a step keeps in memory, not one bit of it (nn/residual.hpp), and
  // memory.limit_mb only whether a run may start.
  for (const char* key : {"log", "checkpoint", "save_weights", "init", "check_every_steps",
                          "on_nonfinite", "max_skipped", "divergence", "watchdog", "debug",
                          "threads", "prefetch", "reduce", "eval", "early_stopping", "memory"})
    kept.erase(key);
  if (!cosine_spans_run(config)) kept.erase("epochs");
  // compute.isa changes which kernel variant computes, never a bit (Note [kernels per
  // instruction set] in src/kernels/isa.cpp): a run may resume on another CPU or another cap.
  // compute.precision changes only the rounding of the products' operands: the checkpoint holds
  // the float32 master weights and optimizer state whatever it was, so a bf16 run may go on in
  // bf16_reference on a CPU without bf16, or in float32 (docs/precision.md).
  if (kept.contains("compute")) {
    kept["compute"].erase("isa");
    kept["compute"].erase("precision");
    if (kept["compute"].empty()) kept.erase("compute");
  }
  if (kept.contains("model") && kept["model"].contains("layers"))
    kept["model"]["layers"] = nn::without_recompute(std::move(kept["model"]["layers"]));
  return kept;
}

namespace detail {

TrainingPosition resume_position(const io::Json& state, const RunIdentity& identity, const std::string& path) {
  if (state.at("model") != identity.model)
    refuse(path, "another model shape: the checkpoint holds " + state.at("model").get<std::string>() +
                     " but the config builds " + identity.model);
  if (state.at("dtype") != identity.dtype)
    refuse(path, "another dtype: the checkpoint is " + state.at("dtype").get<std::string>() +
                     " but the config says " + identity.dtype);
  if (state.at("config") != identity.config) {
    std::string why = "another config: " + config_differences(state.at("config"), identity.config);
    if (state.at("config").value("epochs", io::Json()) != identity.config.value("epochs", io::Json()))
      why += " (schedule cosine with t_max 0 spans the whole run, so epochs cannot change on "
             "resume; set schedule.t_max to resume with other epochs)";
    refuse(path, why);
  }
  if (state.at("train_samples") != identity.train_samples)
    refuse(path, "the training set has " + std::to_string(identity.train_samples) +
                     " samples but had " + state.at("train_samples").dump());
  if (state.at("global_batch") != identity.global_batch)
    refuse(path, "the global batch is " + std::to_string(identity.global_batch) +
                     " at this world size but was " + state.at("global_batch").dump() +
                     " (batch.per_rank times the world size must stay the same)");
  TrainingPosition position;
  position.epoch = checkpoint_integer(state, "epoch", path);
  position.batch = checkpoint_integer(state, "batch", path);
  position.step = checkpoint_integer(state, "step", path);
  if (state.contains("evaluations")) position.evaluations = state["evaluations"];
  if (position.batch > 0 && state.at("steps_per_epoch") != identity.steps_per_epoch)
    refuse(path, "it stopped mid-epoch (after batch " + std::to_string(position.batch) +
                     " of " + state.at("steps_per_epoch").dump() + ") but at this world size " +
                     "an epoch has " + std::to_string(identity.steps_per_epoch) +
                     " batches; resume it at its own world size (" +
                     state.at("world_size").dump() + ")");
  if (position.epoch < 1 || position.batch < 0 || position.step < 0 ||
      position.batch >= identity.steps_per_epoch)
    refuse(path, "corrupt: impossible position epoch " + std::to_string(position.epoch) +
                     ", batch " + std::to_string(position.batch));

  return position;
}

}  // namespace detail
}  // namespace mpiddp::checkpoint
