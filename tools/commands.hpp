#pragma once
// The subcommands of the mpiddp program. Each returns the process exit code.
namespace mpiddp::tools {

// mpiddp train [CONFIG.json] [--set KEY=VALUE]... [--log PATH] [--no-sync] [--quiet]
int train_command(int argc, char** argv);

}  // namespace mpiddp::tools
