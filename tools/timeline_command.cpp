// mpiddp timeline: a trace file of `mpiddp train --trace` drawn as SVG. No MPI involved.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "mpiddp/analysis/timeline_plot.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/svg_writer.hpp"

namespace mpiddp::tools {

int timeline_command(int argc, char** argv) {
  std::string path, output;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "-o" || arg == "--output") {
        if (i + 1 >= argc) throw ConfigError(arg, "needs a file name, like -o timeline.svg");
        output = argv[++i];
      } else if (arg.rfind("--output=", 0) == 0) {
        output = arg.substr(9);
      } else if (arg.size() > 1 && arg[0] == '-') {
        throw ConfigError(arg, "unknown option");
      } else if (path.empty()) {
        path = arg;
      } else {
        throw ConfigError(arg, "one trace file only");
      }
    }
    if (path.empty()) throw ConfigError("TRACE.json", "give the trace file (mpiddp train --trace)");
    if (output.empty()) throw ConfigError("-o", "give the output file, like -o timeline.svg");
    const analysis::Timeline timeline = analysis::read_timeline(path);
    io::write_text_file(output, analysis::timeline_svg(timeline));
    std::printf("wrote %s (%zu process%s)\n", output.c_str(), timeline.processes.size(),
                timeline.processes.size() == 1 ? "" : "es");
    return kExitOk;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "mpiddp timeline: %s\nusage: mpiddp timeline TRACE.json -o timeline.svg\n",
                 e.what());
    return e.code();
  } catch (const Error& e) {
    std::fprintf(stderr, "mpiddp timeline: %s\n", e.what());
    return e.code();
  }
}

}  // namespace mpiddp::tools
