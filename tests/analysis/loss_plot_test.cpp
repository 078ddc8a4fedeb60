#include "mpiddp/analysis/loss_plot.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "../support/text_files.hpp"

namespace mpiddp::analysis {
namespace {

io::RunLog make_log(int world_size, const std::string& path, double offset) {
  io::RunLog log;
  log.path = path;
  log.world_size = world_size;
  log.config = {{"loss", "mse"}};
  for (int s = 1; s <= 8; ++s) log.steps.push_back({(s - 1) / 4 + 1, s, 1.0 / s + offset, 0.1});
  log.epochs = {{1, 0.3 + offset, {}}, {2, 0.15 + offset, {}}};
  log.end = io::EndRecord{8, "x", true, 0.0};
  return log;
}

using test::count;

TEST(LossPlot, OneLogHasOnlyTheLossPanel) {
  const std::string svg = loss_curves_svg({make_log(1, "a.jsonl", 0.0)});
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<g id=\"loss-panel\">"), std::string::npos);
  EXPECT_EQ(svg.find("diff-panel"), std::string::npos);
  EXPECT_NE(svg.find(">np=1  a.jsonl</text>"), std::string::npos);
  // One step curve and one epoch curve, two epoch markers.
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_EQ(count(svg, "<circle"), 2u);
  EXPECT_EQ(count(svg, "<g"), count(svg, "</g>"));
}

TEST(LossPlot, TwoLogsAddTheDifferencePanelAndEscapeNames) {
  const std::string svg =
      loss_curves_svg({make_log(1, "runs/a&b.jsonl", 0.0), make_log(2, "np2.jsonl", 1e-6)});
  EXPECT_NE(svg.find("<g id=\"diff-panel\">"), std::string::npos);
  EXPECT_NE(svg.find("np=1  runs/a&amp;b.jsonl"), std::string::npos);
  EXPECT_EQ(svg.find("a&b"), std::string::npos);
  // 2 step curves + 2 epoch curves + 1 difference curve.
  EXPECT_EQ(count(svg, "<polyline"), 5u);
  // Differences are all 1e-6: the log axis spans one decade, 1e-06 .. 1e-05 (tick labels).
  EXPECT_NE(svg.find(">1e-06</text>"), std::string::npos);
  EXPECT_NE(svg.find(">1e-05</text>"), std::string::npos);
}

TEST(LossPlot, IdenticalRunsSayTheDifferenceIsZero) {
  const std::string svg = loss_curves_svg({make_log(1, "a", 0.0), make_log(2, "b", 0.0)});
  EXPECT_NE(svg.find("identical to the first log"), std::string::npos);
}

TEST(LossPlot, NothingToPlotIsAnError) {
  io::RunLog empty;
  empty.path = "e";
  EXPECT_THROW(loss_curves_svg({empty}), std::invalid_argument);
}

}  // namespace
}  // namespace mpiddp::analysis
