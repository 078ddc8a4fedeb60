// The performance keys of a config: how many threads, whether the next batch is gathered
// ahead, how gradients are reduced, how many micro-batches make one step, and which library
// computes the matrix products. None of them changes the arithmetic of training beyond float
// rounding (docs/config.md).
#include "mpiddp/core/error.hpp"
#include "mpiddp/kernels/gemm.hpp"
#include "mpiddp/kernels/isa.hpp"
#include "mpiddp/kernels/precision.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::config {

namespace {

// reduce.shard names what the ranks cut among themselves; reduce.shard_optimizer true is the
// older spelling of "optimizer" and stays. "gradients" (ZeRO-2) cuts the optimizer's state with
// the gradients, "parameters" (ZeRO-3) the parameters too, gathered a unit at a time:
// reduce.shard_unit "block" (a model's own layer, a residual with its whole body). "layer"
// (each layer inside a block apart) is named by issue 47 and refused until it exists.
// reduce.shard is read only when given, so the resolved config (and its hash) of a config
// without it stays what it was.
void parse_shard(io::JsonSection& reduce, Config& c) {
  if (!reduce.has("shard")) {
    c.reduce.shard_optimizer = reduce.boolean("shard_optimizer", false);
    return;
  }
  if (reduce.has("shard_optimizer"))
    throw ConfigError(reduce.key_path("shard_optimizer"),
                      "is the older spelling of reduce.shard \"optimizer\"; give reduce.shard alone");
  const std::string shard = reduce.choice("shard", "none", {"none", "optimizer", "gradients", "parameters"});
  c.reduce.set_shard(shard);
  if (reduce.has("shard_unit")) {
    if (!c.reduce.shard_parameters)
      throw ConfigError(reduce.key_path("shard_unit"), "applies to reduce.shard \"parameters\" only");
    c.reduce.shard_unit = reduce.choice("shard_unit", "block", {"block", "layer"});
    if (c.reduce.shard_unit == "layer")
      throw ConfigError(reduce.key_path("shard_unit"),
                        "\"layer\" (each layer inside a residual block gathered apart) is not in this version of "
                        "mpiddp; \"block\" gathers a model's own layer, a residual block with its whole body, at a time");
  }
}

}  // namespace

std::string shard_key_path(const Config& config) {
  const bool spelled_new = config.resolved.contains("reduce") && config.resolved["reduce"].contains("shard");
  return spelled_new ? "reduce.shard" : "reduce.shard_optimizer";
}

void parse_performance(io::JsonSection& root, Config& c) {
  c.threads = root.integer("threads", 0, 0, 1024);
  // Read only when given, so that the resolved config (and so the hash) of a config without
  // it stays what it was.
  if (root.has("prefetch")) c.prefetch = root.boolean("prefetch", true);
  c.accumulate_steps = root.integer("accumulate_steps", 1, 1, int64_t{1} << 20);
  auto reduce = root.section("reduce");
  c.reduce.algorithm = reduce.choice("algorithm", "auto", {"auto", "mpi", "shm"});
  c.reduce.bucket_cap_mb = reduce.number("bucket_cap_mb", 25.0, 0.001, 1024.0);
  c.reduce.first_bucket_mb = reduce.number("first_bucket_mb", 1.0, 0.001, 1024.0);
  c.reduce.overlap = reduce.boolean("overlap", true);
  c.reduce.compress = reduce.choice("compress", "none", {"none", "bf16"});
  parse_shard(reduce, c);
  reduce.finish();
  // memory.limit_mb: the section is read only when given, as compute.isa below, so that the
  // resolved config of a config without it stays what it was.
  if (root.has("memory")) {
    auto memory = root.section("memory");
    if (memory.has("limit_mb")) c.memory_limit_mb = memory.number("limit_mb", 0.0, 1.0, 1e12);
    memory.finish();
  }
  auto compute = root.section("compute");
  std::vector<std::string> choices = kernels::gemm_backend_names();
  choices.insert(choices.begin(), "auto");
  c.gemm = compute.choice("gemm", "auto", choices);
  kernels::GemmBackend backend;
  if (c.gemm != "auto" && !kernels::find_gemm_backend(c.gemm, &backend)) {
    std::string built;
    for (kernels::GemmBackend b : kernels::available_gemm_backends()) built += std::string(built.empty() ? "" : ", ") + kernels::gemm_backend_name(b);
    throw ConfigError(compute.key_path("gemm"), c.gemm + " is not built into this mpiddp (built in: " + built +
                                                    "); scripts/install-deps.sh installs the libraries, then rebuild");
  }
  // compute.isa: a cap on the instruction-set level of our kernels (kernels/isa.hpp); whether
  // the CPU runs it is the trainer's check, on the machine that trains. Read only when given,
  // so the resolved config (and its hash) of a config without it stays what it was.
  if (compute.has("isa")) {
    std::vector<std::string> levels = kernels::isa_names();
    levels.insert(levels.begin(), "auto");
    c.isa = compute.choice("isa", "auto", levels);
  }
  // compute.precision (kernels/precision.hpp, docs/precision.md): read only when given, as isa.
  // Whether this CPU has bf16 is the trainer's check, on the machine that trains.
  if (compute.has("precision")) {
    c.precision = compute.choice("precision", "float32", kernels::precision_names());
    if (c.precision != "float32" && c.dtype == "float64")
      throw ConfigError(compute.key_path("precision"), "is " + c.precision +
                                                           ", but dtype is float64: bf16 products are a float32 "
                                                           "model's; use dtype float32 or precision float32");
  }
  compute.finish();
}

}  // namespace mpiddp::config
