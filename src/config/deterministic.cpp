#include "mpiddp/config/deterministic.hpp"

#include "mpiddp/core/error.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::config {

namespace {
// The exact sum's headroom (distributed/exact_sum.hpp) is sized for at most this many terms.
constexpr int64_t kMaxChunks = 4096;
}  // namespace

void parse_deterministic(io::JsonSection& root, Config& c) {
  const io::Json* value = root.raw("deterministic");
  if (!value) return;  // absent: the resolved config (and its hash) stay as they were
  if (value->is_boolean()) {
    c.deterministic.enabled = value->get<bool>();
    if (!c.deterministic.enabled) {
      root.put("deterministic", false);
      return;
    }
    root.put("deterministic", {{"chunks", c.deterministic.chunks}});
  } else if (value->is_object()) {
    c.deterministic.enabled = true;
    auto section = root.section("deterministic");
    c.deterministic.chunks = section.integer("chunks", c.deterministic.chunks, 1, kMaxChunks);
    section.finish();
  } else {
    throw ConfigError("deterministic", "expected true, false or an object like {\"chunks\": 24}, got " +
                                           value->dump(-1, ' ', false, io::Json::error_handler_t::replace));
  }
  if (c.batch_per_rank > 0)
    throw ConfigError("deterministic", "needs batch.global: with batch.per_rank the global batch "
                                       "changes with the world size, and so would the bits");
  if (c.batch_global % c.deterministic.chunks != 0)
    throw ConfigError("deterministic.chunks",
                      "the global batch " + std::to_string(c.batch_global) +
                          " is not divisible by deterministic.chunks " +
                          std::to_string(c.deterministic.chunks) +
                          "; choose chunks that divide batch.global");
  if (!c.sync)
    throw ConfigError("deterministic", "needs sync: without the gradient reduction there is "
                                       "nothing to make exact (drop --no-sync or deterministic)");
  if (c.faults.inject.enabled())
    throw ConfigError("deterministic", "faults.inject is not supported in deterministic mode");
  if (c.reduce.compress != "none")
    throw ConfigError("reduce.compress", "is " + c.reduce.compress + ", but deterministic mode "
                                         "sums exactly, in int64; use none");
  // Not yet: the grid's weight gradient (kernels/grid_product.hpp) takes float32 operands, and
  // the chunked products' widths were checked for the float32 libraries only.
  if (c.precision != "float32")
    throw ConfigError("compute.precision", "is " + c.precision + ", but deterministic mode computes in float32 "
                                           "only (docs/precision.md); use float32, or drop deterministic");
}

void check_deterministic_fits(const Config& c, int world_size, Index train_samples) {
  if (!c.deterministic.enabled) return;
  const Index chunks = c.deterministic.chunks;
  const std::string chunks_text = std::to_string(chunks);
  if (chunks % world_size != 0)
    throw ConfigError("deterministic.chunks",
                      "deterministic.chunks " + chunks_text + " is not divisible by the world size " +
                          std::to_string(world_size) + ": every rank takes whole chunks; use " +
                          "a world size that divides " + chunks_text + " or other chunks");
  const Index per_rank = chunks / world_size;
  if (per_rank % c.accumulate_steps != 0)
    throw ConfigError("accumulate_steps",
                      "accumulate_steps " + std::to_string(c.accumulate_steps) +
                          " does not divide the " + std::to_string(per_rank) +
                          " chunks per rank (deterministic.chunks " + chunks_text +
                          " over " + std::to_string(world_size) + " ranks)");
  // A sample count that the chunks divide is divided by every world size that divides the
  // chunks: no rank pads or truncates, so the epoch holds the same samples at every N, and
  // the last, shorter step is cut into equal chunks too.
  if (train_samples % chunks != 0)
    throw ConfigError("deterministic.chunks",
                      "the " + std::to_string(train_samples) +
                          " training samples are not divisible by deterministic.chunks " +
                          chunks_text + ": the epoch's last step would not split into equal "
                          "chunks; use a sample count that " + chunks_text + " divides");
}

}  // namespace mpiddp::config
