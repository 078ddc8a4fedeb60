#pragma once
// The config keys of weight interchange and checkpoints: init.weights, save_weights and the
// checkpoint section (sampler.order is read with the rest of the sampler section).
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/config/config.hpp"

namespace mpiddp::config {

void parse_interchange_keys(io::JsonSection& root, Config& c);

}  // namespace mpiddp::config
