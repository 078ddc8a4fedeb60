#include "mpiddp/tools/config_args.hpp"

#include "mpiddp/core/error.hpp"

namespace mpiddp::tools {

std::string option_value(int argc, char** argv, int& i, const char* flag) {
  if (i + 1 >= argc) throw ConfigError(flag, "needs a value");
  return argv[++i];
}

bool take_config_argument(ConfigArgs& args, int argc, char** argv, int& i) {
  const std::string arg = argv[i];
  if (arg == "--set") {
    args.overrides.push_back(option_value(argc, argv, i, "--set"));
  } else if (arg.rfind("--set=", 0) == 0) {
    args.overrides.push_back(arg.substr(6));
  } else if (arg == "--deterministic") {
    args.deterministic = true;
  } else if ((arg.empty() || arg[0] != '-') && args.config_path.empty()) {
    args.config_path = arg;
  } else {
    return false;
  }
  return true;
}

void reject_argument(const std::string& arg) {
  if (!arg.empty() && arg[0] == '-') throw ConfigError(arg, "unknown option; see mpiddp --help");
  throw ConfigError(arg, "only one config file may be given");
}

config::Config load_config(const ConfigArgs& args, const io::Json& fallback) {
  io::Json user = args.config_path.empty() ? fallback : config::read_config_file(args.config_path);
  // Before the overrides, so that --set deterministic.chunks=48 still applies; a config
  // that already holds a deterministic object keeps its settings.
  if (args.deterministic && !(user.contains("deterministic") && user["deterministic"].is_object()))
    user["deterministic"] = true;
  for (const auto& assignment : args.overrides) config::apply_override(user, assignment);
  return config::parse_config(user);
}

}  // namespace mpiddp::tools
