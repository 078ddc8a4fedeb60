#pragma once
// The gradient reduction paths the equivalence tests run on, as gtest parameters.
#include <gtest/gtest.h>

#include <string>

#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::test {

// A reduction path: a reduce.algorithm, whether buckets start during backward, and the
// micro-batches per step.
struct Path {
  std::string algorithm;
  bool overlap;
  int accumulate_steps;
};

// "shm_overlap", "mpi_blocking_accumulate2": the test's name suffix.
inline std::string path_name(const ::testing::TestParamInfo<Path>& info) {
  return info.param.algorithm + (info.param.overlap ? "_overlap" : "_blocking") +
         (info.param.accumulate_steps > 1 ? "_accumulate" + std::to_string(info.param.accumulate_steps) : "");
}

// Sets the path's keys in a user config, with buckets of first_mb and cap_mb MiB so that
// even a small model's gradients go in several collectives.
inline void apply_path(io::Json& user, const Path& path, double first_mb, double cap_mb) {
  config::apply_override(user, "reduce.algorithm=" + path.algorithm);
  config::apply_override(user, std::string("reduce.overlap=") + (path.overlap ? "true" : "false"));
  config::apply_override(user, "accumulate_steps=" + std::to_string(path.accumulate_steps));
  config::apply_override(user, "reduce.first_bucket_mb=" + std::to_string(first_mb));
  config::apply_override(user, "reduce.bucket_cap_mb=" + std::to_string(cap_mb));
}

}  // namespace mpiddp::test
