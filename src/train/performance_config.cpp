// The performance keys of a config: how many threads, how gradients are reduced, and how
// many micro-batches make one step. None of them changes the arithmetic of training beyond
// float rounding (docs/config.md).
#include "mpiddp/core/error.hpp"
#include "mpiddp/train/config.hpp"

namespace mpiddp::train {

void parse_performance(io::JsonSection& root, Config& c) {
  c.threads = root.integer("threads", 0, 0, 1024);
  c.accumulate_steps = root.integer("accumulate_steps", 1, 1, int64_t{1} << 20);
  auto reduce = root.section("reduce");
  c.reduce.algorithm = reduce.choice("algorithm", "auto", {"auto", "mpi", "shm"});
  c.reduce.bucket_cap_mb = reduce.number("bucket_cap_mb", 25.0, 0.001, 1024.0);
  c.reduce.first_bucket_mb = reduce.number("first_bucket_mb", 1.0, 0.001, 1024.0);
  c.reduce.overlap = reduce.boolean("overlap", true);
  c.reduce.compress = reduce.choice("compress", "none", {"none", "bf16"});
  reduce.finish();
}

}  // namespace mpiddp::train
