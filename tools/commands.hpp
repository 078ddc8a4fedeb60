#pragma once
// The subcommands of the mpiddp program. Each returns the process exit code.
// mpiddp train is public, for programs with layer types of their own (docs/library.md).
#include "mpiddp/tools/train_command.hpp"

namespace mpiddp::tools {

// mpiddp compare BASELINE.jsonl RUN.jsonl [--rtol R] [--atol A] [--metric M] [--json]
// Exit 0: within tolerance, 1: outside, 2: not comparable (see docs/compare.md).
int compare_command(int argc, char** argv);

// mpiddp flight FILE... [--json]: the flight recorder files side by side, and where the
// ranks first disagree. Exit 0: the rings agree, 1: a disagreement (or a missing rank, or
// every rank stuck in one collective), 2: a file cannot be read or is not a flight file.
int flight_command(int argc, char** argv);

// mpiddp plot LOG.jsonl... -o curves.svg
int plot_command(int argc, char** argv);
// mpiddp timeline TRACE.json -o timeline.svg
int timeline_command(int argc, char** argv);
// mpiddp bench CONFIG.json [--set KEY=VALUE]... [--reduce-repeats N] [--reduce-only]
int bench_command(int argc, char** argv);

// mpiddp export CHECKPOINT|DIR OUT.safetensors: the checkpoint's parameters as a weights file
int export_command(int argc, char** argv);

// mpiddp generate WEIGHTS_OR_CHECKPOINT [--config C] [--prompt TEXT] [--tokens N]
//                 [--temperature F] [--top-k K] [--seed S]: a language model's text
int generate_command(int argc, char** argv);

// mpiddp tokenize TEXT... -o PREFIX [--vocab N] [--model-type bpe|unigram] [--model M]
//                 [--eval-fraction F] [--format nanogpt|llmc] [--threads N]: a SentencePiece
// tokenizer (PREFIX.model) and the texts as token files (PREFIX.train.bin, PREFIX.eval.bin)
int tokenize_command(int argc, char** argv);

}  // namespace mpiddp::tools
