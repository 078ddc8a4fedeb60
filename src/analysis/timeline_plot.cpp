#include "mpiddp/analysis/timeline_plot.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "mpiddp/analysis/axis.hpp"
#include "mpiddp/core/error.hpp"
#include "mpiddp/io/atomic_file.hpp"
#include "mpiddp/io/json_reader.hpp"
#include "mpiddp/io/svg_writer.hpp"

namespace mpiddp::analysis {

namespace {

using io::Json;

// Colours by span kind, in the legend's order (record/step_trace.hpp's SpanKind). Waiting
// for other ranks is the only red; the step is a pale band the phases sit in.
struct KindStyle {
  const char* kind;
  const char* color;
  const char* label;
};
constexpr KindStyle kKinds[] = {
    {"step", "#e4e4e4", "step"},
    {"zero_grad", "#9edae5", "zero gradients"},
    {"data", "#8c564b", "data"},
    {"forward", "#1f77b4", "forward"},
    {"backward", "#2ca02c", "backward"},
    {"reduction_wait", "#e8141c", "waiting for other ranks (reduction)"},
    {"check", "#c5b0d5", "finiteness check"},
    {"optimizer", "#9467bd", "optimizer"},
    {"reduction", "#ff9f1c", "bucket reduction (in flight)"},
    {"evaluation", "#bcbd22", "evaluation"},
    {"checkpoint", "#555555", "checkpoint"},
    {"gather", "#fdd0a2", "parameter gather (in flight)"},
    {"gather_wait", "#a63603", "waiting for a parameter gather"},
};
const char* const kOtherColors[] = {"#17becf", "#e377c2", "#7f7f7f", "#aec7e8", "#98df8a"};

// Figure geometry, in pixels.
constexpr double kWidth = 1200, kLeft = 190, kPlotWidth = 730, kLegendX = kLeft + kPlotWidth + 24;
constexpr double kTop = 48, kRow = 20, kRankGap = 22, kBottom = 60, kInset = 3.5;

[[noreturn]] void bad(const std::string& path, const std::string& problem) {
  throw DataError("'" + path + "' " + problem);
}

std::string text_or(const Json& event, const char* key, const std::string& fallback) {
  const auto it = event.find(key);
  return it != event.end() && it->is_string() ? it->get<std::string>() : fallback;
}

int int_or(const Json& event, const char* key, int fallback) {
  const auto it = event.find(key);
  return it != event.end() && it->is_number_integer() ? it->get<int>() : fallback;
}

}  // namespace

Timeline read_timeline(const std::string& path) {
  const std::vector<char> bytes = io::read_whole_file(path, kExitData, "trace");
  const Json doc = Json::parse(bytes.begin(), bytes.end(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) bad(path, "is not JSON: expected a Chrome trace (mpiddp train --trace)");
  const Json* events = doc.is_array() ? &doc : nullptr;
  if (doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array())
    events = &doc["traceEvents"];
  if (!events) bad(path, "is not a Chrome trace: no \"traceEvents\" list of events");

  std::map<int, TimelineProcess> processes;
  std::map<std::pair<int, int>, TimelineTrack> tracks;
  for (const Json& e : *events) {
    if (!e.is_object()) bad(path, "is not a Chrome trace: an event is not a JSON object");
    const std::string ph = text_or(e, "ph", "");
    const int pid = int_or(e, "pid", 0), tid = int_or(e, "tid", 0);
    if (ph == "M") {
      const std::string name = text_or(e, "name", "");
      const auto args = e.find("args");
      if (args == e.end() || !args->is_object()) continue;
      const std::string value = text_or(*args, "name", "");
      if (name == "process_name") processes[pid].name = value;
      if (name == "thread_name") tracks[{pid, tid}].name = value;
    } else if (ph == "X") {
      const auto ts = e.find("ts"), dur = e.find("dur");
      if (ts == e.end() || !ts->is_number() || dur == e.end() || !dur->is_number())
        bad(path, "has a complete event (\"ph\":\"X\") without numeric ts and dur");
      const double begin = ts->get<double>();
      tracks[{pid, tid}].spans.push_back(
          {begin, begin + dur->get<double>(), text_or(e, "cat", text_or(e, "name", "?"))});
    }
  }
  Timeline timeline;
  size_t span_count = 0;
  for (auto& [key, track] : tracks) {
    if (track.spans.empty()) continue;
    track.tid = key.second;
    if (track.name.empty()) track.name = "thread " + std::to_string(key.second);
    std::stable_sort(track.spans.begin(), track.spans.end(),
                     [](const TimelineSpan& a, const TimelineSpan& b) {
                       return a.begin_us != b.begin_us ? a.begin_us < b.begin_us : a.end_us > b.end_us;
                     });
    span_count += track.spans.size();
    TimelineProcess& process = processes[key.first];
    process.pid = key.first;
    process.tracks.push_back(std::move(track));
  }
  if (span_count == 0) bad(path, "holds no complete (\"ph\":\"X\") spans to draw");
  for (auto& [pid, process] : processes) {
    if (process.tracks.empty()) continue;
    if (process.name.empty()) process.name = "process " + std::to_string(pid);
    timeline.processes.push_back(std::move(process));
  }
  std::string file = path;
  if (file.size() > 60) file = "..." + file.substr(file.size() - 57);
  timeline.title = "Step timeline of " + file;
  if (doc.is_object() && doc.contains("otherData") && doc["otherData"].is_object()) {
    const Json& other = doc["otherData"];
    if (other.contains("steps") && other["steps"].is_array() && other["steps"].size() == 2)
      timeline.title += " (steps " + other["steps"][0].dump() + "-" + other["steps"][1].dump() + ")";
  }
  return timeline;
}

std::string timeline_svg(const Timeline& timeline) {
  double t_lo = std::numeric_limits<double>::infinity(), t_hi = -t_lo;
  size_t rows = 0;
  std::vector<std::string> kinds;  // in order of first appearance, for unknown kinds
  for (const auto& p : timeline.processes)
    for (const auto& track : p.tracks) {
      ++rows;
      for (const auto& s : track.spans) {
        t_lo = std::min(t_lo, s.begin_us);
        t_hi = std::max(t_hi, s.end_us);
        if (std::find(kinds.begin(), kinds.end(), s.kind) == kinds.end()) kinds.push_back(s.kind);
      }
    }
  // Known kinds in the legend's order, then the others as they came.
  std::vector<std::pair<std::string, std::string>> legend;  // (kind, colour)
  std::map<std::string, std::string> color_of;
  for (const auto& k : kKinds)
    if (std::find(kinds.begin(), kinds.end(), k.kind) != kinds.end()) {
      legend.emplace_back(k.label, k.color);
      color_of[k.kind] = k.color;
    }
  size_t others = 0;
  for (const auto& k : kinds)
    if (!color_of.count(k)) {
      color_of[k] = kOtherColors[others++ % (sizeof kOtherColors / sizeof *kOtherColors)];
      legend.emplace_back(k, color_of[k]);
    }

  // Milliseconds on the axis: steps take milliseconds to seconds.
  const Axis x = linear_axis(t_lo / 1000.0, t_hi / 1000.0, 8);
  auto px = [&](double us) { return x.to_pixel(us / 1000.0, kLeft, kLeft + kPlotWidth); };
  const double rows_height = static_cast<double>(rows) * kRow +
                             static_cast<double>(timeline.processes.size()) * kRankGap;
  const double legend_height = 40 + 20 * static_cast<double>(legend.size());
  const double height = kTop + std::max(rows_height, legend_height) + kBottom;
  io::SvgWriter svg(kWidth, height);
  svg.rect(0, 0, kWidth, height, "#fff");
  svg.text(kLeft, 24, timeline.title, {14.0, io::Anchor::kStart, true, "#111", 0.0});

  const double plot_bottom = kTop + rows_height;
  const io::Stroke frame{"#444", 1.0, 1.0, ""}, grid{"#ddd", 1.0, 1.0, ""};
  svg.begin_group("time-axis");
  const io::TextStyle tick_text{11.0, io::Anchor::kMiddle, false, "#333", 0.0};
  for (double t : x.ticks) {
    const double tx = x.to_pixel(t, kLeft, kLeft + kPlotWidth);
    svg.line(tx, kTop, tx, plot_bottom, grid);
    svg.line(tx, plot_bottom, tx, plot_bottom + 5, frame);
    svg.text(tx, plot_bottom + 18, tick_label(t), tick_text);
  }
  svg.line(kLeft, plot_bottom, kLeft + kPlotWidth, plot_bottom, frame);
  svg.text(kLeft + kPlotWidth / 2, plot_bottom + 38, "time since the ranks' common start (ms)",
           {12.0, io::Anchor::kMiddle, false, "#222", 0.0});
  svg.end_group();

  svg.begin_group("timeline");
  double y = kTop;
  const io::Stroke step_border{"#999", 0.6, 1.0, ""};
  for (const auto& p : timeline.processes) {
    svg.begin_group("rank-" + std::to_string(p.pid));
    y += kRankGap;
    svg.text(8, y - 6, p.name, {11.5, io::Anchor::kStart, true, "#111", 0.0});
    for (const auto& track : p.tracks) {
      svg.rect(kLeft, y, kPlotWidth, kRow - 2, "#fafafa");
      svg.text(kLeft - 8, y + kRow / 2 + 2, track.name, {11.0, io::Anchor::kEnd, false, "#333", 0.0});
      // Depth by nesting: a span inside another is drawn inset within it.
      std::vector<double> open_ends;
      for (const auto& s : track.spans) {
        while (!open_ends.empty() && s.begin_us >= open_ends.back()) open_ends.pop_back();
        const double depth = static_cast<double>(std::min<size_t>(open_ends.size(), 2));
        open_ends.push_back(s.end_us);
        const double x0 = px(s.begin_us), w = std::max(px(s.end_us) - x0, 0.6);
        const double inset = depth * kInset;
        svg.rect(x0, y + inset, w, kRow - 2 - 2 * inset, color_of[s.kind],
                 depth == 0 && s.kind == "step" ? &step_border : nullptr);
      }
      y += kRow;
    }
    svg.end_group();
  }
  svg.end_group();

  svg.begin_group("legend");
  svg.text(kLegendX, kTop + 4, "span kinds", {12.0, io::Anchor::kStart, true, "#111", 0.0});
  for (size_t i = 0; i < legend.size(); ++i) {
    const double ly = kTop + 26 + 20 * static_cast<double>(i);
    svg.rect(kLegendX, ly - 10, 18, 12, legend[i].second, &step_border);
    svg.text(kLegendX + 24, ly, legend[i].first, {11.0, io::Anchor::kStart, false, "#222", 0.0});
  }
  svg.end_group();
  return svg.finish();
}

}  // namespace mpiddp::analysis
