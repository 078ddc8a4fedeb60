// trace_check TRACE.json LOG.jsonl FIRST LAST WORLD [--expect-overlap] [--expect-gathers]: checks a trace file
// of `mpiddp train --trace` (docs/log-format.md) against the run's log, for cli_trace.
// Prints what failed and exits 1, or prints a summary and exits 0. Checked:
//   - valid JSON with a traceEvents list; ranks 0..WORLD-1 are the processes, named "rank R (";
//   - on every track the spans are in start order and nest (none overlaps another partly);
//   - exactly steps FIRST..LAST appear, each with one step span per rank;
//   - a step's compute spans (zero_grad + data + forward + backward + reduction_wait +
//     check + optimizer) add up to its step span within 5 %, and rank 0's step span is the log's
//     step time_s within 5 %;
//   - with WORLD > 1 every rank-step has bucket reductions (bytes > 0, a known path, on the
//     track 1 + bucket), and with --expect-overlap one of them starts before backward ends, in every one;
//   - gathers (reduce.shard "parameters") lie off the compute track, each with its unit and
//     bytes > 0, and their waits on it; with --expect-gathers every rank-step has both, and a
//     unit's gather starts before the wait for it (the prefetch) in every one. The share of the
//     gathers' time that no wait exposed is printed.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

int failures = 0;
void fail(const std::string& what) {
  if (++failures <= 20) std::fprintf(stderr, "trace_check: %s\n", what.c_str());
}

struct Span {
  std::string name;
  int pid, tid;
  double ts, dur;
  const json* args;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: trace_check TRACE.json LOG.jsonl FIRST LAST WORLD [--expect-overlap] "
                         "[--expect-gathers]\n");
    return 2;
  }
  const long first = std::stol(argv[3]), last = std::stol(argv[4]);
  const int world = std::stoi(argv[5]);
  bool expect_overlap = false, expect_gathers = false;
  for (int i = 6; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--expect-overlap") expect_overlap = true;
    else if (flag == "--expect-gathers") expect_gathers = true;
    else {
      std::fprintf(stderr, "trace_check: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  std::ifstream in(argv[1]);
  const json doc = json::parse(in, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("traceEvents") ||
      !doc["traceEvents"].is_array()) {
    std::fprintf(stderr, "trace_check: %s is not JSON with a traceEvents list\n", argv[1]);
    return 1;
  }

  std::set<int> named;
  std::vector<Span> spans;
  for (const json& e : doc["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    if (ph == "M" && e.value("name", "") == "process_name") {
      const int pid = e.at("pid").get<int>();
      const std::string name = e.at("args").at("name").get<std::string>();
      if (name.rfind("rank " + std::to_string(pid) + " (", 0) != 0)
        fail("process " + std::to_string(pid) + " is named '" + name + "'");
      named.insert(pid);
    } else if (ph == "X") {
      spans.push_back({e.at("name").get<std::string>(), e.at("pid").get<int>(), e.at("tid").get<int>(),
                       e.at("ts").get<double>(), e.at("dur").get<double>(), &e.at("args")});
    } else if (ph != "M") {
      fail("an event of phase '" + ph + "'");
    }
  }
  for (int r = 0; r < world; ++r)
    if (!named.count(r)) fail("rank " + std::to_string(r) + " is not a named process");
  if (named.size() != static_cast<size_t>(world)) fail("more processes than ranks");

  // Order and nesting on each track; ts and dur are microseconds with 3 decimals.
  constexpr double kEps = 0.002;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> open;  // (begin, end) stack
  std::map<std::pair<int, int>, double> last_start;
  for (const Span& s : spans) {
    const auto track = std::make_pair(s.pid, s.tid);
    if (last_start.count(track) && s.ts + kEps < last_start[track])
      fail("rank " + std::to_string(s.pid) + " track " + std::to_string(s.tid) + ": " + s.name +
           " at " + std::to_string(s.ts) + " comes after a later span");
    last_start[track] = s.ts;
    auto& stack = open[track];
    while (!stack.empty() && s.ts >= stack.back().second - kEps) stack.pop_back();
    if (!stack.empty() && s.ts + s.dur > stack.back().second + kEps)
      fail("rank " + std::to_string(s.pid) + " track " + std::to_string(s.tid) + ": " + s.name +
           " [" + std::to_string(s.ts) + ", +" + std::to_string(s.dur) + "] overlaps its parent partly");
    stack.emplace_back(s.ts, s.ts + s.dur);
    if (s.dur < 0) fail(s.name + " has a negative duration");
  }

  // Per (rank, step): the step span, the sum of its compute spans, backward's end, and
  // whether a bucket reduction started before that end.
  struct StepSums {
    double step = -1, parts = 0, backward_end = -1, first_bucket_start = 1e300;
    int buckets = 0;
    int gathers = 0, waits = 0, prefetched = 0;
    double gather_time = 0, wait_time = 0;
  };
  const std::set<std::string> parts = {"zero_grad", "data", "forward", "backward",
                                       "reduction_wait", "check", "optimizer"};
  const std::set<std::string> paths = {"mpi", "shm", "two-level"};
  std::map<std::pair<int, long>, StepSums> steps;
  for (const Span& s : spans) {
    const long step = s.args->at("step").get<long>();
    if (step < first || step > last) fail(s.name + " of step " + std::to_string(step) + " is not selected");
    StepSums& sums = steps[{s.pid, step}];
    if (s.name == "step") {
      if (sums.step >= 0) fail("two step spans for step " + std::to_string(step));
      sums.step = s.dur;
    } else if (parts.count(s.name)) {
      sums.parts += s.dur;
      if (s.tid != 0) fail(s.name + " is not on the compute track");
      if (s.name == "backward") sums.backward_end = std::max(sums.backward_end, s.ts + s.dur);
    } else if (s.name == "reduction") {
      ++sums.buckets;
      sums.first_bucket_start = std::min(sums.first_bucket_start, s.ts);
      if (s.args->at("bytes").get<long>() <= 0) fail("a bucket of no bytes");
      if (!paths.count(s.args->at("path").get<std::string>())) fail("a bucket with an unknown path");
      if (s.tid != 1 + s.args->at("bucket").get<int>()) fail("a bucket on the wrong track");
    } else if (s.name == "gather") {
      ++sums.gathers;
      sums.gather_time += s.dur;
      if (s.args->at("bytes").get<long>() <= 0) fail("a gather of no bytes");
      if (s.args->at("unit").get<int>() < 0) fail("a gather of no unit");
      if (s.tid < 1) fail("a gather on the compute track");
    } else if (s.name == "gather_wait") {
      ++sums.waits;
      sums.wait_time += s.dur;
      if (s.tid != 0) fail("a gather's wait off the compute track");
    }
  }
  // A gather that began before its wait did (by more than the clock readings between them)
  // was prefetched: it travelled while the unit before it computed.
  for (const Span& g : spans) {
    if (g.name != "gather") continue;
    const double end = g.ts + g.dur;
    for (const Span& w : spans)
      if (w.name == "gather_wait" && w.pid == g.pid && std::fabs(w.ts + w.dur - end) < kEps && w.ts > g.ts + 1.0) {
        ++steps[{g.pid, g.args->at("step").get<long>()}].prefetched;
        break;
      }
  }

  std::map<long, double> logged;  // step -> time_s, from the log's step records
  std::ifstream log(argv[2]);
  for (std::string line; std::getline(log, line);) {
    const json record = json::parse(line, nullptr, false);
    if (record.is_object() && record.value("kind", "") == "step")
      logged[record.at("step").get<long>()] = record.at("time_s").get<double>();
  }

  int overlapped = 0, gathered = 0;
  double worst_sum = 0, worst_log = 0, gather_time = 0, wait_time = 0;
  for (int r = 0; r < world; ++r)
    for (long step = first; step <= last; ++step) {
      const auto it = steps.find({r, step});
      const std::string where = "rank " + std::to_string(r) + " step " + std::to_string(step);
      if (it == steps.end() || it->second.step < 0) {
        fail(where + " has no step span");
        continue;
      }
      const StepSums& s = it->second;
      const double sum_error = std::fabs(s.parts - s.step) / s.step;
      worst_sum = std::max(worst_sum, sum_error);
      if (sum_error > 0.05)
        fail(where + ": its spans add up to " + std::to_string(s.parts) + " us of a " +
             std::to_string(s.step) + " us step");
      if (world > 1 && s.buckets == 0) fail(where + " has no bucket reduction");
      if (s.waits != s.gathers) fail(where + ": " + std::to_string(s.gathers) + " gathers but " +
                                     std::to_string(s.waits) + " waits for them");
      if (expect_gathers && (s.gathers == 0 || s.prefetched == 0))
        fail(where + ": " + std::to_string(s.gathers) + " gathers, " + std::to_string(s.prefetched) + " prefetched");
      gathered += s.gathers;
      gather_time += s.gather_time;
      wait_time += s.wait_time;
      if (s.first_bucket_start < s.backward_end) ++overlapped;
      if (r == 0) {
        if (!logged.count(step)) {
          fail(where + " has no step record with time_s in the log");
          continue;
        }
        const double log_error = std::fabs(s.step / 1e6 - logged[step]) / logged[step];
        worst_log = std::max(worst_log, log_error);
        if (log_error > 0.05)
          fail(where + ": step span " + std::to_string(s.step) + " us, log time_s " +
               std::to_string(logged[step]));
      }
    }
  const long rank_steps = world * (last - first + 1);
  if (expect_overlap && overlapped != rank_steps)
    fail("only " + std::to_string(overlapped) + " of " + std::to_string(rank_steps) +
         " rank-steps started a bucket reduction while backward ran");
  if (failures) return 1;
  std::printf("trace_check: OK: %d ranks, steps %ld-%ld, %zu spans; step sums within %.2f %%, "
              "log times within %.2f %%; %d rank-steps overlapped",
              world, first, last, spans.size(), 100 * worst_sum, 100 * worst_log, overlapped);
  if (gathered > 0)
    std::printf("; %d gathers, %.1f %% of their time hidden behind compute", gathered,
                100.0 * (1.0 - wait_time / gather_time));
  std::printf("\n");
  return 0;
}
