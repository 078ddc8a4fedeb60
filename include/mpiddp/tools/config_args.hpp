#pragma once
// The command-line arguments that every training subcommand shares: one config file and
// --set overrides. One parser, so `train` and `bench` read them the same way.
#include <string>
#include <vector>

#include "mpiddp/config/config.hpp"

namespace mpiddp::tools {

struct ConfigArgs {
  std::string config_path;             // "": none given
  std::vector<std::string> overrides;  // KEY=VALUE, applied in order
  bool deterministic = false;          // --deterministic: "deterministic" on, before the overrides
};

// The value after option argv[i] (advancing i), or a ConfigError naming the option.
std::string option_value(int argc, char** argv, int& i, const char* flag);

// Takes argv[i] (and its value) when it is a config argument: --set KEY=VALUE,
// --set=KEY=VALUE, --deterministic or the config path. Returns false for anything else; an unknown option
// or a second config path is then the caller's to report (see reject_argument).
bool take_config_argument(ConfigArgs& args, int argc, char** argv, int& i);

// The ConfigError for an argument no parser took.
[[noreturn]] void reject_argument(const std::string& arg);

// The config file (or, when none was given, `fallback`) with the overrides applied, validated.
config::Config load_config(const ConfigArgs& args, const io::Json& fallback);

}  // namespace mpiddp::tools
