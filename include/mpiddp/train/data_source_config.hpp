#pragma once
// Parsing of one data source section (data.train or data.eval) of the config.
#include "mpiddp/data/source.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::train {

// Reads the keys of the section's "source"; a ConfigError names the key path.
data::SourceConfig parse_data_source(io::JsonSection& section);

}  // namespace mpiddp::train
