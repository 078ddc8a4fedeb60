// The step trace: trace.* config keys, the recorder's step selection, reserved memory and
// times, and the Chrome trace document rank 0 writes (docs/log-format.md).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "../support/config_errors.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/record/step_trace.hpp"
#include "mpiddp/record/trace_file.hpp"

namespace mpiddp::record {
namespace {

using namespace std::chrono_literals;

using test::overrides_error_key;

TEST(TraceConfig, DefaultsToSteps2To21AndNoFile) {
  const config::Config c = config::parse_config(config::default_experiment());
  EXPECT_EQ(c.trace.path, "");
  EXPECT_EQ(c.trace.first_step, 2);
  EXPECT_EQ(c.trace.last_step, 21);
  EXPECT_EQ(c.resolved["trace"]["steps"], io::Json::parse("[2, 21]"));
  io::Json user = config::default_experiment();
  config::apply_override(user, "trace.path=t.json");
  config::apply_override(user, "trace.steps=[5,5]");
  const config::Config one = config::parse_config(user);
  EXPECT_EQ(one.trace.path, "t.json");
  EXPECT_EQ(one.trace.first_step, 5);
  EXPECT_EQ(one.trace.last_step, 5);
}

TEST(TraceConfig, BadValuesNameTheKey) {
  EXPECT_EQ(overrides_error_key({"trace.path=t.json", "trace.steps=5"}), "trace.steps");
  EXPECT_EQ(overrides_error_key({"trace.path=t.json", "trace.steps=[1,2,3]"}), "trace.steps");
  EXPECT_EQ(overrides_error_key({"trace.path=t.json", "trace.steps=[0,3]"}), "trace.steps");
  EXPECT_EQ(overrides_error_key({"trace.path=t.json", "trace.steps=[4,3]"}), "trace.steps");
  EXPECT_EQ(overrides_error_key({"trace.path=t.json", "trace.steps=[1.5,3]"}), "trace.steps");
  EXPECT_EQ(overrides_error_key({"trace.path=t.json", "trace.steps=[1,100000]"}), "(no error)");
  EXPECT_EQ(overrides_error_key({"trace.path=t.json", "trace.steps=[1,100001]"}), "trace.steps");
  EXPECT_EQ(overrides_error_key({"trace.steps=[2,4]"}), "trace.steps");  // no file to go to
  EXPECT_EQ(overrides_error_key({"trace.path=t.json", "trace.colour=1"}), "trace.colour");
  EXPECT_EQ(overrides_error_key({"trace.path=3"}), "trace.path");
}

TEST(StepTrace, SelectsExactlyTheConfiguredSteps) {
  const StepTrace off;
  EXPECT_FALSE(off.enabled());
  for (int64_t s : {0, 1, 2, 21, 1000}) EXPECT_FALSE(off.selects(s)) << s;
  const StepTrace on(config::TraceConfig{"t.json", 2, 21});
  EXPECT_TRUE(on.enabled());
  EXPECT_FALSE(on.selects(1));
  EXPECT_TRUE(on.selects(2));
  EXPECT_TRUE(on.selects(21));
  EXPECT_FALSE(on.selects(22));
  EXPECT_FALSE(on.selects(-5));  // negative differences wrap to huge unsigned values
}

TEST(StepTrace, KeepsTimesSinceTheOriginAndDropsWhatDoesNotFit) {
  StepTrace trace(config::TraceConfig{"t.json", 1, 10});
  trace.reserve(2, 3);  // room for 6 spans
  const auto origin = StepTrace::Clock::time_point{} + 1s;
  trace.set_origin(origin);
  trace.begin_step(7);
  trace.add(SpanKind::kData, origin + 1500ns, origin + 4000ns);
  ASSERT_EQ(trace.spans().size(), 1u);
  EXPECT_EQ(trace.spans()[0].begin_ns, 1500);
  EXPECT_EQ(trace.spans()[0].end_ns, 4000);
  EXPECT_EQ(trace.spans()[0].step, 7);
  EXPECT_EQ(trace.spans()[0].bucket, -1);
  for (int i = 0; i < 7; ++i) trace.add(SpanKind::kForward, origin, origin + 1us);
  EXPECT_EQ(trace.spans().size(), 6u);  // 1 + 5 kept, 2 dropped: nothing grows in a step
  EXPECT_EQ(trace.dropped(), 2);
  EXPECT_EQ(trace.spans().back().kind, SpanKind::kForward);
}

TEST(StepTrace, BucketSpansStartWhereTheSumRuns) {
  const auto origin = StepTrace::Clock::time_point{};
  const distributed::BucketTiming timing{3, 4096, origin + 10us, origin + 50us, origin + 70us};
  StepTrace mpi(config::TraceConfig{"t.json", 1, 10});
  mpi.reserve(1, 4);
  mpi.set_reduction_path("mpi", false);  // in flight from its start, during backward
  mpi.bucket_reduced(timing);
  EXPECT_EQ(mpi.spans()[0].begin_ns, 10000);
  EXPECT_EQ(mpi.spans()[0].end_ns, 70000);
  EXPECT_EQ(mpi.spans()[0].bucket, 3);
  EXPECT_EQ(mpi.spans()[0].bytes, 4096);
  EXPECT_EQ(mpi.spans()[0].kind, SpanKind::kReduction);
  StepTrace shm(config::TraceConfig{"t.json", 1, 10});
  shm.reserve(1, 4);
  shm.set_reduction_path("shm", true);  // summed inside the wait
  shm.bucket_reduced(timing);
  EXPECT_EQ(shm.spans()[0].begin_ns, 50000);
}

TEST(TraceFile, ProcessesTracksAndSortedMicrosecondSpans) {
  RankTrace r0{"hostA", "mpi", 0, {}}, r1{"hostB", "mpi", 1, {}};
  // Out of order on purpose: the file sorts each track by start, enclosing spans first.
  r0.spans = {{2, 1500, 2500, 0, -1, SpanKind::kData},
              {2, 1000, 9000, 0, -1, SpanKind::kStep},
              {2, 1000, 1500, 0, -1, SpanKind::kZeroGradients},
              {2, 2000, 6000, 256, 1, SpanKind::kReduction}};
  r1.spans = {{2, 1200, 8000, 0, -1, SpanKind::kStep}};
  const io::Json doc = io::Json::parse(trace_json({r0, r1}, config::TraceConfig{"t.json", 2, 21}));
  const io::Json& events = doc["traceEvents"];
  std::vector<std::string> process_names, x_names;
  std::vector<double> x_ts;
  bool bucket_track_named = false;
  for (const io::Json& e : events) {
    if (e["ph"] == "M" && e["name"] == "process_name") process_names.push_back(e["args"]["name"]);
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 0 && e["tid"] == 2)
      bucket_track_named = e["args"]["name"] == "reduction bucket 1";
    if (e["ph"] == "X") {
      x_names.push_back(e["name"]);
      x_ts.push_back(e["ts"]);
      if (e["name"] == "reduction") {
        EXPECT_EQ(e["tid"], 2);  // track 1 + bucket
        EXPECT_EQ(e["args"]["bytes"], 256);
        EXPECT_EQ(e["args"]["path"], "mpi");
        EXPECT_EQ(e["dur"], 4.0);  // 4000 ns
      }
    }
  }
  EXPECT_EQ(process_names, (std::vector<std::string>{"rank 0 (hostA)", "rank 1 (hostB)"}));
  EXPECT_TRUE(bucket_track_named);
  EXPECT_EQ(x_names, (std::vector<std::string>{"step", "zero_grad", "data", "reduction", "step"}));
  EXPECT_EQ(x_ts, (std::vector<double>{1.0, 1.0, 1.5, 2.0, 1.2}));
  EXPECT_EQ(doc["otherData"]["dropped_spans"], 1);
  EXPECT_EQ(doc["otherData"]["steps"], io::Json::parse("[2, 21]"));
}

TEST(StepTrace, GatherSpansRunFromTheStartToTheWaitsReturn) {
  const auto origin = StepTrace::Clock::time_point{};
  StepTrace trace(config::TraceConfig{"t.json", 1, 10});
  trace.reserve(1, 4);
  trace.unit_gathered(5, 1024, origin + 20us, origin + 35us);
  ASSERT_EQ(trace.spans().size(), 1u);
  EXPECT_EQ(trace.spans()[0].begin_ns, 20000);
  EXPECT_EQ(trace.spans()[0].end_ns, 35000);
  EXPECT_EQ(trace.spans()[0].bucket, 5);  // the unit
  EXPECT_EQ(trace.spans()[0].bytes, 1024);
  EXPECT_EQ(trace.spans()[0].kind, SpanKind::kGather);
}

TEST(TraceFile, GathersGoOnTheirUnitsTracksAfterTheBuckets) {
  // Two bucket tracks (1, 2), then unit u's gathers on track 3 + u; the waits on the compute track.
  RankTrace r0{"hostA", "shm", 0, {}};
  r0.spans = {{2, 1000, 9000, 0, -1, SpanKind::kStep},
              {2, 3000, 3500, 0, -1, SpanKind::kGatherWait},
              {2, 2000, 3500, 4096, 1, SpanKind::kGather},
              {2, 1500, 2000, 512, 0, SpanKind::kGather},
              {2, 6000, 7000, 256, 1, SpanKind::kReduction}};
  const io::Json doc = io::Json::parse(trace_json({r0}, config::TraceConfig{"t.json", 2, 21}));
  std::map<int, std::string> track_names;
  std::vector<std::pair<std::string, int>> x;  // (name, tid)
  for (const io::Json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") track_names[e["tid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X") {
      x.emplace_back(e["name"], e["tid"]);
      if (e["name"] == "gather" && e["tid"] == 4) {
        EXPECT_EQ(e["args"]["unit"], 1);
        EXPECT_EQ(e["args"]["bytes"], 4096);
        EXPECT_EQ(e["dur"], 1.5);
      }
    }
  }
  EXPECT_EQ(track_names, (std::map<int, std::string>{{0, "compute"},
                                                      {1, "reduction bucket 0"},
                                                      {2, "reduction bucket 1"},
                                                      {3, "parameter gather unit 0"},
                                                      {4, "parameter gather unit 1"}}));
  EXPECT_EQ(x, (std::vector<std::pair<std::string, int>>{
                   {"step", 0}, {"gather_wait", 0}, {"reduction", 2}, {"gather", 3}, {"gather", 4}}));
}

}  // namespace
}  // namespace mpiddp::record
