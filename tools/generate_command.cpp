// mpiddp generate: text from a trained language model (inference/text_generator.hpp). One
// process, no MPI.
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>

#include "command_args.hpp"
#include "commands.hpp"
#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/checkpoint/checkpoint_parts.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/inference/text_generator.hpp"

namespace mpiddp::tools {

namespace {

const char* kGenerateUsage =
    "usage: mpiddp generate WEIGHTS_OR_CHECKPOINT [--config C] [--prompt TEXT] [--tokens N]\n"
    "                       [--temperature F] [--top-k K] [--seed S]\n";

struct GenerateArgs {
  std::string weights;
  std::string config;
  std::string prompt;
  inference::SamplingOptions sampling;
};

GenerateArgs parse_generate_args(int argc, char** argv) {
  GenerateArgs args;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError(arg, "needs a value");
      return argv[++i];
    };
    if (arg == "--config") args.config = next();
    else if (arg == "--prompt") args.prompt = next();
    else if (arg == "--tokens") args.sampling.tokens = parse_whole(arg, next(), 0, int64_t{1} << 30);
    else if (arg == "--top-k") args.sampling.top_k = parse_whole(arg, next(), 0, int64_t{1} << 30);
    else if (arg == "--seed") args.sampling.seed = static_cast<uint64_t>(parse_whole(arg, next(), 0, INT64_MAX));
    else if (arg == "--temperature") {
      args.sampling.temperature = parse_number_below(arg, next(), std::nextafter(0.0, 1.0), HUGE_VAL, "a number > 0");
    } else if (arg.size() > 1 && arg[0] == '-') {
      throw ConfigError(arg, "unknown option");
    } else if (args.weights.empty()) {
      args.weights = arg;
    } else {
      throw ConfigError(arg, "one weights file or checkpoint only");
    }
  }
  if (args.weights.empty()) throw ConfigError("WEIGHTS_OR_CHECKPOINT", "missing");
  return args;
}

}  // namespace

int generate_command(int argc, char** argv) {
  try {
    const GenerateArgs args = parse_generate_args(argc, argv);
    // A directory means its newest checkpoint, as for --resume and export.
    const std::string path = std::filesystem::is_directory(args.weights)
                                 ? checkpoint::resolve_resume_path(args.weights, "")
                                 : args.weights;
    if (checkpoint::is_parts_checkpoint(path))
      throw Error(kExitCheckpoint, "'" + path + "' is a checkpoint in parts: export its weights first "
                                   "(mpiddp export " + path + " W.safetensors) and generate from W.safetensors");
    std::optional<io::Json> config;
    if (!args.config.empty()) config = config::read_config_file(args.config);
    const auto generator = inference::load_text_generator(path, config ? &*config : nullptr);
    // The prompt and its continuation, as nanoGPT's sample.py prints them.
    const std::string text = args.prompt + generator->continue_text(args.prompt, args.sampling);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
    return kExitOk;
  } catch (const Error& e) {
    std::fprintf(stderr, "mpiddp generate: %s\n", e.what());
    if (e.code() == kExitConfig) std::fputs(kGenerateUsage, stderr);
    return e.code();
  }
}

}  // namespace mpiddp::tools
