// mpiddp compare: does a run match its baseline? Reads two logs, no MPI involved.
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mpiddp/analysis/compare.hpp"
#include "mpiddp/analysis/compare_exact.hpp"
#include "mpiddp/analysis/compare_report.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/run_log_reader.hpp"

namespace mpiddp::tools {

namespace {

struct CompareArgs {
  std::vector<std::string> logs;
  std::optional<double> rtol, atol;
  analysis::Metric metric = analysis::Metric::kAll;
  bool json = false;
};

double parse_tolerance(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !(value >= 0.0))
    throw std::invalid_argument(flag + ": expected a number >= 0, got '" + text + "'");
  return value;
}

CompareArgs parse_compare_args(int argc, char** argv) {
  CompareArgs args;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i], value;
    const auto equals = arg.find('=');
    const bool has_inline = arg.rfind("--", 0) == 0 && equals != std::string::npos;
    if (has_inline) {
      value = arg.substr(equals + 1);
      arg.resize(equals);
    }
    auto next = [&]() -> std::string {
      if (has_inline) return value;
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--rtol") args.rtol = parse_tolerance(arg, next());
    else if (arg == "--atol") args.atol = parse_tolerance(arg, next());
    else if (arg == "--metric") args.metric = analysis::parse_metric(next());
    else if (arg == "--json" && !has_inline) args.json = true;
    else if (arg.size() > 1 && arg[0] == '-') throw std::invalid_argument("unknown option " + arg);
    else args.logs.push_back(arg);
  }
  if (args.logs.size() != 2)
    throw std::invalid_argument("expected two logs, BASELINE.jsonl RUN.jsonl; got " +
                                std::to_string(args.logs.size()));
  return args;
}

int incomparable(const CompareArgs& args, const std::string& reason,
                 const std::vector<std::string>& keys = {}) {
  if (args.json) std::printf("%s\n", analysis::incomparable_json(reason, keys).c_str());
  std::fprintf(stderr, "mpiddp compare: cannot compare: %s\n", reason.c_str());
  return analysis::kCompareIncomparable;
}

// Both logs deterministic: the usual checks (same config, epochs and steps) with zero
// tolerance, then every record bit for bit.
int compare_exactly(const CompareArgs& args, const io::RunLog& baseline, const io::RunLog& run,
                    int64_t chunks_a, int64_t chunks_b) {
  if (chunks_a != chunks_b)
    return incomparable(args, "deterministic.chunks differ (" + std::to_string(chunks_a) + " vs " +
                                  std::to_string(chunks_b) +
                                  "): deterministic runs give the same bits only at the same chunks",
                        {"deterministic.chunks"});
  // Every chunk is a micro-batch already: accumulate_steps changes no bit in this mode, so
  // two runs may differ in it.
  io::RunLog a = baseline, b = run;
  a.config.erase("accumulate_steps");
  b.config.erase("accumulate_steps");
  const analysis::Comparison c =
      analysis::compare_runs(a, b, args.metric, analysis::Tolerance{0.0, 0.0}, false);
  const analysis::BitComparison bits = analysis::compare_bits(args.logs[0], args.logs[1]);
  const bool pass = bits.identical() && c.exit_code() == analysis::kCompareWithin;
  const std::string verdict =
      pass ? "PASS: bitwise identical: " + std::to_string(bits.fields) + " values in " +
                 std::to_string(bits.records) + " step, epoch and end records (times aside), " +
                 "param_checksum " + run.end->param_checksum
           : "FAIL: not bitwise identical: " +
                 (bits.identical() ? c.verdict() : "first difference at " + bits.first_difference);
  if (args.json) {
    io::Json report = io::Json::parse(analysis::comparison_json(baseline, run, c));
    report["verdict"] = pass ? "pass" : "fail";
    report["exit_code"] = pass ? analysis::kCompareWithin : analysis::kCompareOutside;
    report["bitwise_identical"] = pass;
    report["first_difference"] = bits.first_difference;
    std::printf("%s\n", report.dump().c_str());
  } else {
    std::printf("baseline: %s (world size %d)\nrun:      %s (world size %d)\ndeterministic "
                "runs (chunks %lld): exact equality demanded\n%s\n",
                baseline.path.c_str(), baseline.world_size, run.path.c_str(), run.world_size,
                static_cast<long long>(chunks_a), verdict.c_str());
  }
  return pass ? analysis::kCompareWithin : analysis::kCompareOutside;
}

}  // namespace

int compare_command(int argc, char** argv) {
  CompareArgs args;
  try {
    args = parse_compare_args(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr,
                 "mpiddp compare: %s\nusage: mpiddp compare BASELINE.jsonl RUN.jsonl [--rtol R] "
                 "[--atol A] [--metric eval_loss|loss|eval_accuracy|all] [--json]\n",
                 e.what());
    return analysis::kCompareIncomparable;
  }
  try {
    const io::RunLog baseline = io::read_run_log(args.logs[0]);
    const io::RunLog run = io::read_run_log(args.logs[1]);
    // Two deterministic runs: nothing but the same bits will do (unless a tolerance is given).
    const auto chunks_a = analysis::deterministic_chunks(args.logs[0]);
    const auto chunks_b = analysis::deterministic_chunks(args.logs[1]);
    if (chunks_a && chunks_b && !args.rtol && !args.atol)
      return compare_exactly(args, baseline, run, *chunks_a, *chunks_b);
    const analysis::Tolerance defaults = analysis::default_tolerance(baseline, run);
    const analysis::Tolerance tolerance{args.rtol.value_or(defaults.rtol),
                                        args.atol.value_or(defaults.atol)};
    const bool is_default = !args.rtol && !args.atol;
    const analysis::Comparison c =
        analysis::compare_runs(baseline, run, args.metric, tolerance, is_default);
    const std::string report = args.json ? analysis::comparison_json(baseline, run, c) + "\n"
                                         : analysis::comparison_text(baseline, run, c, args.metric);
    std::fputs(report.c_str(), stdout);
    return c.exit_code();
  } catch (const analysis::Incomparable& e) {
    return incomparable(args, e.what(), e.differing_keys);
  } catch (const Error& e) {  // a log that cannot be read: nothing to compare
    return incomparable(args, e.what());
  }
}

}  // namespace mpiddp::tools
