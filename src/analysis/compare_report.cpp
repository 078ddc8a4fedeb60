#include "mpiddp/analysis/compare_report.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace mpiddp::analysis {

using io::Json;
using io::RunLog;

namespace {

void append(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void append(std::string& out, const char* format, ...) {
  char line[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  out += line;
}

std::string describe(const RunLog& log) {
  std::string text = "world_size " + std::to_string(log.world_size) + ", " + log.dtype();
  if (!log.launcher.empty()) text += ", launched by " + log.launcher;
  // The distinct hosts, in rank order; a long list is cut after three.
  std::vector<std::string> hosts;
  for (const auto& h : log.hosts)
    if (std::find(hosts.begin(), hosts.end(), h) == hosts.end()) hosts.push_back(h);
  for (size_t i = 0; i < hosts.size() && i < 3; ++i) text += (i ? ", " : " on ") + hosts[i];
  if (hosts.size() > 3) text += " and " + std::to_string(hosts.size() - 3) + " more hosts";
  return text;
}

void append_row(std::string& out, const ComparedValue& v, const char* label) {
  char step[24] = "-";
  if (v.step > 0) std::snprintf(step, sizeof step, "%lld", static_cast<long long>(v.step));
  append(out, "%5lld  %6s  %-13s  %22.17g  %22.17g  %9.3g  %9.3g  %s\n",
         static_cast<long long>(v.epoch), step, label, v.baseline, v.run, v.abs_diff, v.rel_diff,
         v.ok ? "ok" : "OUTSIDE");
}

}  // namespace

std::string comparison_text(const RunLog& baseline, const RunLog& run, const Comparison& c,
                            Metric metric) {
  std::string out;
  append(out, "baseline: %s (%s)\n", baseline.path.c_str(), describe(baseline).c_str());
  append(out, "run:      %s (%s)\n", run.path.c_str(), describe(run).c_str());
  append(out, "tolerance: |run - baseline| <= %g + %g * |baseline|  (%s)\n\n", c.tolerance.atol,
         c.tolerance.rtol,
         c.tolerance_is_default ? ("default for " + default_tolerance_name(baseline, run) + "; see docs/compare.md").c_str()
                             : "from the command line");
  append(out, "%5s  %6s  %-13s  %22s  %22s  %9s  %9s  %s\n", "epoch", "step", "metric", "baseline",
         "run", "abs_diff", "rel_diff", "ok");
  const bool every_step = metric == Metric::kLoss;
  bool summarised = false;
  std::vector<std::pair<ComparedValue, const char*>> rows;
  for (size_t i = 0; i < c.values.size(); ++i) {
    const ComparedValue& v = c.values[i];
    if (v.step == 0 || every_step) {
      rows.emplace_back(v, v.step == 0 ? v.metric.c_str() : "loss");
      continue;
    }
    // Summarise an epoch's steps (consecutive in values) by the one with the largest
    // difference; the row is ok only when every step of the epoch is.
    size_t end = i, worst = i;
    bool all_ok = true;
    for (; end < c.values.size() && c.values[end].step > 0 && c.values[end].epoch == v.epoch; ++end) {
      if (c.values[end].abs_diff > c.values[worst].abs_diff) worst = end;
      all_ok = all_ok && c.values[end].ok;
    }
    rows.emplace_back(c.values[worst], "loss (worst)");
    rows.back().first.ok = all_ok;
    summarised = true;
    i = end - 1;
  }
  // Epoch by epoch: its eval metrics, then its worst step.
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& x, const auto& y) { return x.first.epoch < y.first.epoch; });
  for (const auto& [v, label] : rows) append_row(out, v, label);
  if (summarised)
    out += "(loss (worst): the step of that epoch with the largest difference; "
           "--metric loss lists every step)\n";
  out += "\nlargest differences:\n";
  for (const auto& m : c.metrics) {
    const ComparedValue& w = c.values[m.worst];
    append(out, "  %-13s  abs %9.3g  rel %9.3g  at %s %lld   (%lld compared, %lld outside)\n",
           m.metric.c_str(), m.max_abs_diff, m.max_rel_diff, w.step > 0 ? "step" : "epoch",
           static_cast<long long>(w.step > 0 ? w.step : w.epoch), static_cast<long long>(m.compared),
           static_cast<long long>(m.outside));
  }
  append(out, "replicas_identical: baseline %s, run %s\n",
         c.baseline_replicas_identical ? "true" : "false", c.run_replicas_identical ? "true" : "false");
  out += c.verdict() + "\n";
  return out;
}

std::string comparison_json(const RunLog& baseline, const RunLog& run, const Comparison& c) {
  Json out = {{"verdict", c.exit_code() == kCompareWithin ? "pass" : "fail"},
              {"exit_code", c.exit_code()},
              {"summary", c.verdict()},
              {"rtol", c.tolerance.rtol},
              {"atol", c.tolerance.atol},
              {"default_tolerance", c.tolerance_is_default}};
  Json metrics = Json::object();
  for (const auto& m : c.metrics) {
    const ComparedValue& w = c.values[m.worst];
    metrics[m.metric] = {{"compared", m.compared},       {"outside", m.outside},
                         {"max_abs_diff", m.max_abs_diff}, {"max_rel_diff", m.max_rel_diff},
                         {"worst_epoch", w.epoch},         {"worst_step", w.step}};
  }
  out["metrics"] = metrics;
  out["replicas_identical"] = {{"baseline", c.baseline_replicas_identical},
                               {"run", c.run_replicas_identical}};
  for (const auto& [key, log] : {std::pair{"baseline", &baseline}, std::pair{"run", &run}})
    out[key] = {{"path", log->path}, {"world_size", log->world_size}, {"dtype", log->dtype()},
                {"launcher", log->launcher}};
  Json values = Json::array();
  for (const auto& v : c.values)
    values.push_back({{"metric", v.metric}, {"epoch", v.epoch}, {"step", v.step},
                      {"baseline", v.baseline}, {"run", v.run}, {"abs_diff", v.abs_diff},
                      {"rel_diff", v.rel_diff}, {"ok", v.ok}});
  out["values"] = values;
  return out.dump();
}

std::string incomparable_json(const std::string& reason, const std::vector<std::string>& keys) {
  return Json{{"verdict", "incomparable"},
              {"exit_code", kCompareIncomparable},
              {"reason", reason},
              {"differing_keys", keys}}
      .dump();
}

}  // namespace mpiddp::analysis
