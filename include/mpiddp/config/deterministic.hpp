#pragma once
// The "deterministic" key (docs/config.md, docs/design.md Note [deterministic mode]): the
// same bits at every world size. `true`, or an object with its settings, switches it on.
#include <string>

#include "mpiddp/core/types.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::config {

struct Config;

struct DeterministicConfig {
  bool enabled = false;
  // C: the global batch is cut into C chunks of B/C samples, whatever the world size. 24 is
  // divided by 1, 2, 3, 4, 6 and 8.
  Index chunks = 24;
};

// Reads "deterministic": absent or false (off), true (on, defaults) or {"chunks": C}.
void parse_deterministic(io::JsonSection& root, Config& c);

// The checks that need the world size and the training set: a ConfigError naming the key
// and the numbers when B, N, accumulate_steps or the epoch's samples do not fit the chunks.
void check_deterministic_fits(const Config& c, int world_size, Index train_samples);

}  // namespace mpiddp::config
