// mpiddp export: a checkpoint's parameters as a plain safetensors weights file. One process,
// no MPI: it only rewrites a file.
#include <cstdio>
#include <string>

#include "commands.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/checkpoint/checkpoint.hpp"

namespace mpiddp::tools {

int export_command(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: mpiddp export CHECKPOINT.safetensors|DIR OUT.safetensors\n");
    return kExitConfig;
  }
  try {
    // A directory means its newest checkpoint, as for --resume.
    const std::string checkpoint = checkpoint::resolve_resume_path(argv[1], "");
    const size_t tensors = checkpoint::export_checkpoint_weights(checkpoint, argv[2]);
    std::printf("mpiddp export: %zu tensors of '%s' written to '%s'\n", tensors,
                checkpoint.c_str(), argv[2]);
    return kExitOk;
  } catch (const Error& e) {
    std::fprintf(stderr, "mpiddp: %s\n", e.what());
    return e.code();
  }
}

}  // namespace mpiddp::tools
