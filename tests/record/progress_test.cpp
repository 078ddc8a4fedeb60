#include "mpiddp/record/progress.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace mpiddp::record {
namespace {

std::string duration(double s) {
  char text[24];
  return format_duration(s, text, sizeof text);
}

TEST(Progress, Durations) {
  EXPECT_EQ(duration(0.0), "0:00");
  EXPECT_EQ(duration(7.4), "0:07");
  EXPECT_EQ(duration(65.0), "1:05");
  EXPECT_EQ(duration(3723.0), "1:02:03");  // 1 h 2 min 3 s
  EXPECT_EQ(duration(-1.0), "--:--");
  EXPECT_EQ(duration(NAN), "--:--");
}

TEST(Progress, LineHasEveryFigure) {
  ProgressState p;
  p.epoch = 2;
  p.epochs = 4;
  p.step = 30;
  p.steps = 80;
  p.samples_per_s = 12345.4;
  p.loss = 0.1234567;
  p.elapsed_s = 12.0;
  char line[160];
  // ETA: 12 s for 30 steps -> 0.4 s a step; 50 steps left -> 20 s.
  EXPECT_STREQ(format_progress(p, line, sizeof line),
               "epoch 2/4  step 30/80  12345 samples/s  loss 0.123457  elapsed 0:12  ETA 0:20");
  p.step = 0;
  EXPECT_NE(std::string(format_progress(p, line, sizeof line)).find("ETA --:--"), std::string::npos);
  // A short buffer truncates, never overflows.
  char tiny[8];
  EXPECT_STREQ(format_progress(p, tiny, sizeof tiny), "epoch 2");
}

std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string text;
  for (int c; (c = std::fgetc(f)) != EOF;) text += static_cast<char>(c);
  return text;
}

TEST(Progress, PlainLinesAreThrottled) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  // 2 epochs of 10 steps, 64 samples a step, a line every 10 s.
  ProgressLine line(f, ProgressLine::Mode::kPlain, 2, 20, 64, 10.0);
  EXPECT_FALSE(line.update(1, 1, 0.5, 3.0));   // 3 s: too soon
  EXPECT_TRUE(line.update(1, 5, 0.25, 10.0));  // 10 s: a line
  EXPECT_FALSE(line.update(1, 6, 0.2, 19.9));
  line.clear();  // nothing to erase in a file
  line.finish(20.0);
  // 5 steps * 64 samples / 10 s = 32 samples/s; ETA 10 s / 5 steps * 15 steps = 30 s.
  EXPECT_EQ(contents(f),
            "progress: epoch 1/2  step 5/20  32 samples/s  loss 0.25  elapsed 0:10  ETA 0:30\n"
            "progress: epoch 1/2  step 6/20  19 samples/s  loss 0.2  elapsed 0:20  ETA 0:47\n");
  std::fclose(f);
}

TEST(Progress, TerminalLineIsRedrawnInPlace) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressLine line(f, ProgressLine::Mode::kTerminal, 1, 4, 10, 0.25);
  EXPECT_TRUE(line.update(1, 1, 1.0, 0.4));  // 10 samples / 0.4 s = 25 samples/s
  line.clear();
  line.finish(1.0);
  EXPECT_EQ(contents(f),
            "\r\033[Kepoch 1/1  step 1/4  25 samples/s  loss 1  elapsed 0:00  ETA 0:01"
            "\r\033[K"
            "\r\033[Kepoch 1/1  step 1/4  10 samples/s  loss 1  elapsed 0:01  ETA 0:03\n");
  std::fclose(f);
}

TEST(Progress, OffWritesNothingAndModeFollowsTheRequest) {
  std::FILE* f = std::tmpfile();
  ProgressLine line(f, ProgressLine::Mode::kOff, 1, 4, 10, 0.0);
  EXPECT_FALSE(line.update(1, 1, 1.0, 100.0));
  line.finish(100.0);
  EXPECT_EQ(contents(f), "");
  // A temporary file is no terminal: plain, unless asked otherwise; quiet and other ranks: off.
  EXPECT_EQ(ProgressLine::mode_for(f, false, true, nullptr), ProgressLine::Mode::kPlain);
  EXPECT_EQ(ProgressLine::mode_for(f, false, true, "terminal"), ProgressLine::Mode::kTerminal);
  EXPECT_EQ(ProgressLine::mode_for(f, false, true, "off"), ProgressLine::Mode::kOff);
  EXPECT_EQ(ProgressLine::mode_for(f, true, true, "terminal"), ProgressLine::Mode::kOff);
  EXPECT_EQ(ProgressLine::mode_for(f, false, false, nullptr), ProgressLine::Mode::kOff);
  std::fclose(f);
}

}  // namespace
}  // namespace mpiddp::record
