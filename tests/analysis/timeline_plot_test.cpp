// mpiddp timeline's reader and figure: rows per process and track, and bad input named.
#include "mpiddp/analysis/timeline_plot.hpp"

#include <gtest/gtest.h>

#include <string>

#include "../support/text_files.hpp"
#include "mpiddp/core/error.hpp"

namespace mpiddp::analysis {
namespace {

using test::count;
using test::write_temp;

TEST(Timeline, ReadsProcessesTracksAndSpans) {
  const std::string path = write_temp("timeline_ok.json", R"json({"traceEvents":[
    {"ph":"M","name":"process_name","pid":1,"args":{"name":"rank 1 (b)"}},
    {"ph":"M","name":"process_name","pid":0,"args":{"name":"rank 0 (a)"}},
    {"ph":"M","name":"thread_name","pid":0,"tid":1,"args":{"name":"reduction bucket 0"}},
    {"ph":"X","name":"forward","cat":"forward","pid":0,"tid":0,"ts":20,"dur":5},
    {"ph":"X","name":"step","cat":"step","pid":0,"tid":0,"ts":10,"dur":100},
    {"ph":"X","name":"reduction","cat":"reduction","pid":0,"tid":1,"ts":30,"dur":10},
    {"ph":"X","name":"reduction_wait","pid":1,"tid":0,"ts":40,"dur":60}],
    "otherData":{"steps":[2,21]}})json");
  const Timeline t = read_timeline(path);
  ASSERT_EQ(t.processes.size(), 2u);
  EXPECT_EQ(t.processes[0].name, "rank 0 (a)");
  ASSERT_EQ(t.processes[0].tracks.size(), 2u);
  EXPECT_EQ(t.processes[0].tracks[0].name, "thread 0");  // no thread_name: a default
  EXPECT_EQ(t.processes[0].tracks[1].name, "reduction bucket 0");
  ASSERT_EQ(t.processes[0].tracks[0].spans.size(), 2u);
  EXPECT_EQ(t.processes[0].tracks[0].spans[0].kind, "step");  // sorted by start
  EXPECT_DOUBLE_EQ(t.processes[0].tracks[0].spans[1].end_us, 25.0);
  EXPECT_EQ(t.processes[1].tracks[0].spans[0].kind, "reduction_wait");  // name without cat
  EXPECT_NE(t.title.find("(steps 2-21)"), std::string::npos);

  const std::string svg = timeline_svg(t);
  EXPECT_EQ(count(svg, "<g id=\"rank-"), 2u);
  EXPECT_EQ(count(svg, "<g id=\"legend\">"), 1u);
  EXPECT_EQ(count(svg, "<g id=\"time-axis\">"), 1u);
  EXPECT_EQ(count(svg, "fill=\"#e8141c\""), 2u);  // the wait's bar and its legend swatch
  EXPECT_NE(svg.find(">waiting for other ranks (reduction)</text>"), std::string::npos);
}

TEST(Timeline, BadInputIsADataErrorNamingTheFile) {
  struct Case {
    std::string name, text, message;
  };
  for (const Case& c : {Case{"t_text.json", "not json {", "is not JSON"},
                        Case{"t_object.json", R"({"model":{}})", "is not a Chrome trace"},
                        Case{"t_empty.json", R"({"traceEvents":[{"ph":"M","name":"x"}]})",
                             "holds no complete"},
                        Case{"t_nots.json", R"([{"ph":"X","dur":3}])", "has a complete event"}}) {
    const std::string path = write_temp(c.name, c.text);
    try {
      read_timeline(path);
      ADD_FAILURE() << c.name << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), kExitData) << c.name;
      EXPECT_NE(std::string(e.what()).find("'" + path + "' " + c.message), std::string::npos) << e.what();
    }
  }
  try {
    read_timeline(::testing::TempDir() + "no_such_trace.json");
    ADD_FAILURE() << "a missing file: no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), kExitData);
    EXPECT_NE(std::string(e.what()).find("no_such_trace.json"), std::string::npos);
  }
}

}  // namespace
}  // namespace mpiddp::analysis
