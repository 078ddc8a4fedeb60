#pragma once
// Parsing of one data source section (data.train or data.eval) of the config.
#include "mpiddp/core/input_kind.hpp"
#include "mpiddp/data/source.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::config {

// Reads the keys of the section's "source"; a ConfigError names the key path. model_input:
// what the model's first layer takes; token ids come from npy integer features, with the
// vocabulary in "classes".
data::SourceConfig parse_data_source(io::JsonSection& section, InputKind model_input = InputKind::kValues);

}  // namespace mpiddp::config
