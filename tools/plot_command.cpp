// mpiddp plot: loss curves of one or more run logs as an SVG file. No MPI involved.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mpiddp/analysis/loss_plot.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/run_log_reader.hpp"
#include "mpiddp/io/svg_writer.hpp"

namespace mpiddp::tools {

int plot_command(int argc, char** argv) {
  std::vector<std::string> paths;
  std::string output;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "-o" || arg == "--output") {
        if (i + 1 >= argc) throw ConfigError(arg, "needs a file name, like -o curves.svg");
        output = argv[++i];
      } else if (arg.rfind("--output=", 0) == 0) {
        output = arg.substr(9);
      } else if (arg.size() > 1 && arg[0] == '-') {
        throw ConfigError(arg, "unknown option");
      } else {
        paths.push_back(arg);
      }
    }
    if (paths.empty()) throw ConfigError("LOG.jsonl", "give at least one run log");
    if (output.empty()) throw ConfigError("-o", "give the output file, like -o curves.svg");
    std::vector<io::RunLog> logs;
    for (const auto& path : paths) logs.push_back(io::read_run_log(path));
    io::write_text_file(output, analysis::loss_curves_svg(logs));
    std::printf("wrote %s (%zu run%s)\n", output.c_str(), logs.size(), logs.size() == 1 ? "" : "s");
    return kExitOk;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "mpiddp plot: %s\nusage: mpiddp plot LOG.jsonl... -o curves.svg\n", e.what());
    return e.code();
  } catch (const Error& e) {
    std::fprintf(stderr, "mpiddp plot: %s\n", e.what());
    return e.code();
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "mpiddp plot: %s\n", e.what());
    return kExitData;
  }
}

}  // namespace mpiddp::tools
