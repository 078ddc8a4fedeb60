// mpiddp flight: the flight recorder files of a job's ranks side by side, and where the ranks
// first disagree. Reads files only, no MPI involved. See docs/reliability.md.
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mpiddp/analysis/flight.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/json_reader.hpp"

namespace mpiddp::tools {

int flight_command(int argc, char** argv) {
  bool json = false;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") json = true;
    else if (arg.size() > 1 && arg[0] == '-') {
      std::fprintf(stderr, "mpiddp flight: unknown option %s\nusage: mpiddp flight FILE... [--json]\n",
                   arg.c_str());
      return kExitConfig;
    } else paths.push_back(arg);
  }
  if (paths.empty()) {
    std::fputs("usage: mpiddp flight FILE... [--json]\n", stderr);
    return kExitConfig;
  }
  try {
    std::vector<analysis::FlightFile> files;
    for (const std::string& path : paths) {
      struct stat info {};
      // A rank killed before it could write leaves no file: named as missing below, by rank.
      if (::stat(path.c_str(), &info) != 0) {
        std::fprintf(stderr, "mpiddp flight: no file '%s' (its rank is listed as missing)\n",
                     path.c_str());
        continue;
      }
      files.push_back(analysis::read_flight_file(path));
    }
    if (files.empty()) throw Error(kExitConfig, "none of the flight files given exists");
    const analysis::FlightAnalysis a = analysis::analyse_flight(files);
    if (json) {
      io::Json out = {{"world_size", a.world_size},
                      {"missing", a.missing},
                      {"verdict", analysis::verdict_name(a.verdict)},
                      {"seq", a.seq},
                      {"ranks", a.ranks},
                      {"summary", a.summary}};
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::fputs(analysis::flight_table(files, a.world_size, a.seq).c_str(), stdout);
      std::printf("\n%s\n", a.summary.c_str());
    }
    const bool healthy = a.verdict == analysis::FlightVerdict::kAgree;
    return healthy ? kExitOk : kExitFailure;
  } catch (const Error& e) {
    std::fprintf(stderr, "mpiddp flight: %s\n", e.what());
    return kExitConfig;
  }
}

}  // namespace mpiddp::tools
