// mpiddp: data-parallel training over MPI. See README.md and docs/.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "commands.hpp"
#include "data_dirs.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/core/memory.hpp"
#include "mpiddp/kernels/isa.hpp"

namespace {

const char* kUsage =
    "usage: mpiddp COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  train [CONFIG.json] [--set KEY=VALUE]... [--log PATH] [--no-sync] [--quiet]\n"
    "        [--resume PATH|DIR|latest|auto] [--save-weights PATH] [--trace PATH]\n"
    "        [--restart JSON] [--deterministic]\n"
    "        train data-parallel; launch with mpirun -np N. Without CONFIG, runs the\n"
    "        built-in default experiment. --resume continues from a checkpoint (latest:\n"
    "        the newest in checkpoint.dir; auto: the same, or from the beginning when\n"
    "        there is none); --save-weights writes the final weights as safetensors\n"
    "        (PyTorch nn.Sequential names); --trace writes a Chrome trace of steps 2-21\n"
    "        (trace.steps), every rank's phases and bucket reductions; --restart is what\n"
    "        launchers pass when they restart a run (docs/launching.md). SIGTERM, SIGINT\n"
    "        or SIGUSR1 stops every rank after the current step with a checkpoint: exit 9.\n"
    "        --deterministic: the same bits at every world size (docs/design.md).\n"
    "  compare BASELINE.jsonl RUN.jsonl [--rtol R] [--atol A]\n"
    "          [--metric eval_loss|loss|eval_accuracy|all] [--json]\n"
    "        check a run's log against a baseline's (no MPI needed). Exit 0: within\n"
    "        tolerance, 1: outside it, 2: the logs cannot be compared.\n"
    "  flight FILE... [--json]\n"
    "        the flight recorder files of a job's ranks (LOG.flight.rankR.json, written\n"
    "        on a watchdog report, an abort or a signal) side by side, and where the ranks\n"
    "        first disagree. Exit 0: they agree, 1: a disagreement or a missing rank,\n"
    "        2: a file cannot be read.\n"
    "  plot LOG.jsonl... -o curves.svg\n"
    "        loss curves of one or more runs, and their per-step differences, as SVG.\n"
    "  timeline TRACE.json -o timeline.svg\n"
    "        a --trace file as SVG: each rank's spans over time, waits in red.\n"
    "\n"
    "  export CHECKPOINT.safetensors|DIR OUT.safetensors\n"
    "        write a checkpoint's parameters (a directory: its newest checkpoint) as a\n"
    "        plain weights file for init.weights or PyTorch's load_state_dict.\n"
    "  generate WEIGHTS_OR_CHECKPOINT [--config C] [--prompt TEXT] [--tokens N]\n"
    "           [--temperature F] [--top-k K] [--seed S]\n"
    "        continue a text with a language model (trained on text, or on tokens with a\n"
    "        tokenizer): prints the prompt and N generated tokens (default 200;\n"
    "        temperature 1, every token a candidate unless --top-k), the same text for\n"
    "        the same seed (default 1337).\n"
    "  tokenize TEXT... -o PREFIX [--vocab N] [--model-type bpe|unigram] [--model M]\n"
    "           [--eval-fraction F] [--format nanogpt|llmc] [--threads N]\n"
    "        train a SentencePiece tokenizer on the texts (BPE of 4096 tokens unless\n"
    "        told), or take model M; write PREFIX.model and the texts' ids as uint16\n"
    "        files for the tokens source: PREFIX.train.bin, and PREFIX.eval.bin with the\n"
    "        last F of them (default 0.1). See docs/language_models.md.\n"
    "  bench CONFIG [--set KEY=VALUE]... [--reduce-repeats N] [--reduce-only]\n"
    "        train CONFIG's epochs (the last one timed) and print one JSON line of\n"
    "        figures: samples/s, per-phase step times, gradient reduction time, GFLOP/s,\n"
    "        peak RSS. See bench/README.md.\n"
    "\n"
    "  mpiddp --version | --help\n";

// The launch scripts and configs that came with this mpiddp (docs/launching.md).
void print_data_dirs(std::FILE* out) {
  const mpiddp::tools::DataDirs dirs = mpiddp::tools::find_data_dirs();
  std::fprintf(out, "\nlaunch scripts: %s%s\nconfigs:        %s\n", dirs.launch.c_str(),
               dirs.found ? "" : " (not found)", dirs.configs.c_str());
}

// The instruction-set levels (docs/isa.md): the build's own, the kernels' and this CPU's.
void print_isa_levels() {
  namespace k = mpiddp::kernels;
  std::printf("built for:        %s (baseline)\n", k::build_arch());
  std::printf("kernels compiled: %s\n", k::isa_names_text(k::compiled_isas(), " ").c_str());
  std::printf("this CPU runs:    %s\n", k::isa_names_text(k::cpu_isas(), " ").c_str());
  std::printf("kernels use:      %s (compute.isa caps it)\n", k::isa_name(k::active_isa()));
}

}  // namespace

int main(int argc, char** argv) {
  mpiddp::configure_allocator();  // before MPI_Init allocates anything
  // A write past the file size limit (ulimit -f) then fails with EFBIG and a clear message
  // naming the file, like a full disk, instead of killing the process without a word.
  std::signal(SIGXFSZ, SIG_IGN);
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    std::FILE* out = argc < 2 ? stderr : stdout;
    std::fputs(kUsage, out);
    print_data_dirs(out);
    return argc < 2 ? mpiddp::kExitConfig : mpiddp::kExitOk;
  }
  const std::string command = argv[1];
  if (command == "--version") {
    std::printf("mpiddp %s\n", MPIDDP_VERSION);
    print_isa_levels();
    return mpiddp::kExitOk;
  }
  if (command == "train") return mpiddp::tools::train_command(argc - 1, argv + 1);
  if (command == "compare") return mpiddp::tools::compare_command(argc - 1, argv + 1);
  if (command == "flight") return mpiddp::tools::flight_command(argc - 1, argv + 1);
  if (command == "plot") return mpiddp::tools::plot_command(argc - 1, argv + 1);
  if (command == "timeline") return mpiddp::tools::timeline_command(argc - 1, argv + 1);
  if (command == "export") return mpiddp::tools::export_command(argc - 1, argv + 1);
  if (command == "generate") return mpiddp::tools::generate_command(argc - 1, argv + 1);
  if (command == "tokenize") return mpiddp::tools::tokenize_command(argc - 1, argv + 1);
  if (command == "bench") return mpiddp::tools::bench_command(argc - 1, argv + 1);
  std::fprintf(stderr, "mpiddp: unknown command '%s'\n\n%s", command.c_str(), kUsage);
  return mpiddp::kExitConfig;
}
