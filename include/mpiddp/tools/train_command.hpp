#pragma once
// `mpiddp train` as a library call, for a program that brings layer types of its own: it
// registers them (nn::register_layer_type, nn/layer_registry.hpp) and hands its command line
// here, and its configs may then name those types. Everything else is the mpiddp program's:
// the same arguments, MPI start-up and shutdown, the setup agreement across ranks, logs,
// checkpoints and exit codes (core/error.hpp). Link mpiddp::mpi; see docs/library.md.
//
//   int main(int argc, char** argv) {
//     mpiddp::nn::register_layer_type(my_layer_type());
//     return mpiddp::tools::train_command(argc, argv);  // my_train CONFIG.json --log run.jsonl
//   }
namespace mpiddp::tools {

// argv[0] is the command's name (ignored), argv[1..] the arguments of `mpiddp train`:
// [CONFIG.json] [--set KEY=VALUE]... [--log PATH] [--no-sync] [--quiet] [--resume ...]
// [--save-weights PATH] [--trace PATH]. Call it once per process: it initialises and finalises MPI.
int train_command(int argc, char** argv);

}  // namespace mpiddp::tools
