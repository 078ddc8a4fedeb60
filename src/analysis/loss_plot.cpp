#include "mpiddp/analysis/loss_plot.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <stdexcept>

#include "mpiddp/analysis/axis.hpp"
#include "mpiddp/io/svg_writer.hpp"

namespace mpiddp::analysis {

namespace {

using Points = std::vector<std::pair<double, double>>;  // (step, value)

const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                               "#9467bd", "#8c564b", "#e377c2", "#17becf"};
const char* color_of(size_t run) { return kColors[run % (sizeof kColors / sizeof *kColors)]; }

// Figure geometry, in pixels.
constexpr double kWidth = 960, kLeft = 80, kPlotWidth = 560, kLegendX = kLeft + kPlotWidth + 24;
constexpr double kTop = 44, kLossHeight = 320, kGap = 78, kDiffHeight = 220, kBottom = 58;

struct Panel {
  double x0, y0, w, h;  // plot area
  Axis x, y;
  bool zero_floor = false;  // a log y axis whose bottom edge stands for 0
  double px(double v) const { return x.to_pixel(v, x0, x0 + w); }
  double py(double v) const { return y.to_pixel(v, y0 + h, y0); }
};

Points step_losses(const io::RunLog& log) {
  Points points;
  for (const auto& s : log.steps)
    if (std::isfinite(s.loss)) points.emplace_back(static_cast<double>(s.step), s.loss);
  return points;
}

// Each epoch's eval loss at the last step of that epoch (the step it was measured after).
Points epoch_losses(const io::RunLog& log) {
  std::map<int64_t, int64_t> last_step;
  for (const auto& s : log.steps) last_step[s.epoch] = std::max(last_step[s.epoch], s.step);
  const double per_epoch = log.end && !log.epochs.empty()
                               ? static_cast<double>(log.end->steps) / static_cast<double>(log.epochs.size())
                               : 1.0;
  Points points;
  for (const auto& e : log.epochs) {
    if (!std::isfinite(e.eval_loss)) continue;
    const auto it = last_step.find(e.epoch);
    const double x = it != last_step.end() ? static_cast<double>(it->second) : per_epoch * static_cast<double>(e.epoch);
    points.emplace_back(x, e.eval_loss);
  }
  return points;
}

// |loss - loss of the first log| at every step both logged. Zeros are kept (plotted on
// the panel's floor) and counted.
Points step_differences(const io::RunLog& first, const io::RunLog& log) {
  std::map<int64_t, double> base;
  for (const auto& s : first.steps) base[s.step] = s.loss;
  Points points;
  for (const auto& s : log.steps) {
    const auto it = base.find(s.step);
    const double d = it == base.end() ? NAN : std::fabs(s.loss - it->second);
    if (std::isfinite(d)) points.emplace_back(static_cast<double>(s.step), d);
  }
  return points;
}

std::string run_label(const io::RunLog& log) {
  std::string path = log.path;
  if (path.size() > 38) path = "..." + path.substr(path.size() - 35);
  return "np=" + std::to_string(log.world_size) + "  " + path;
}

void draw_axes(io::SvgWriter& svg, const Panel& p, const std::string& x_label,
               const std::string& y_label, const std::string& title) {
  const io::Stroke frame{"#444", 1.0, 1.0, ""};
  const io::Stroke grid{"#ddd", 1.0, 1.0, ""};
  svg.rect(p.x0, p.y0, p.w, p.h, "#fff", &frame);
  io::TextStyle tick_text{11.0, io::Anchor::kMiddle, false, "#333", 0.0};
  for (double t : p.x.ticks) {
    const double x = p.px(t);
    svg.line(x, p.y0, x, p.y0 + p.h, grid);
    svg.line(x, p.y0 + p.h, x, p.y0 + p.h + 5, frame);
    svg.text(x, p.y0 + p.h + 18, tick_label(t), tick_text);
  }
  tick_text.anchor = io::Anchor::kEnd;
  for (double t : p.y.ticks) {
    const double y = p.py(t);
    svg.line(p.x0, y, p.x0 + p.w, y, grid);
    svg.line(p.x0 - 5, y, p.x0, y, frame);
    svg.text(p.x0 - 8, y + 4, p.zero_floor && t == p.y.lo ? "0" : tick_label(t), tick_text);
  }
  svg.rect(p.x0, p.y0, p.w, p.h, "none", &frame);  // the frame again, over the grid
  svg.text(p.x0 + p.w / 2, p.y0 + p.h + 38, x_label, {12.0, io::Anchor::kMiddle, false, "#222", 0.0});
  svg.text(p.x0 - 58, p.y0 + p.h / 2, y_label, {12.0, io::Anchor::kMiddle, false, "#222", -90.0});
  svg.text(p.x0, p.y0 - 12, title, {14.0, io::Anchor::kStart, true, "#111", 0.0});
}

Axis value_axis(double lo, double hi) {
  // Losses that fall by orders of magnitude read better on a log scale.
  if (lo > 0.0 && hi / lo > 30.0) return log_axis(lo, hi);
  return linear_axis(lo, hi);
}

}  // namespace

std::string loss_curves_svg(const std::vector<io::RunLog>& logs) {
  std::vector<Points> steps, epochs;
  double x_max = 1.0, y_lo = std::numeric_limits<double>::infinity(), y_hi = -y_lo;
  for (const auto& log : logs) {
    steps.push_back(step_losses(log));
    epochs.push_back(epoch_losses(log));
    for (const Points* points : {&steps.back(), &epochs.back()})
      for (const auto& [x, y] : *points) {
        x_max = std::max(x_max, x);
        y_lo = std::min(y_lo, y);
        y_hi = std::max(y_hi, y);
      }
  }
  if (!(y_lo <= y_hi))
    throw std::invalid_argument("no step or epoch records with finite losses to plot");

  const bool with_diff = logs.size() >= 2;
  const double height = kTop + kLossHeight + (with_diff ? kGap + kDiffHeight : 0.0) + kBottom;
  io::SvgWriter svg(kWidth, height);
  svg.rect(0, 0, kWidth, height, "#fff");

  Panel loss{kLeft, kTop, kPlotWidth, kLossHeight, linear_axis(0.0, x_max), value_axis(y_lo, y_hi)};
  const std::string loss_name = logs[0].config.value("loss", std::string("loss"));
  svg.begin_group("loss-panel");
  draw_axes(svg, loss, "optimizer step",
            loss_name + (loss.y.log ? " (log scale)" : ""),
            "Training loss: every step (faint), eval loss per epoch (bold)");
  svg.define_clip("loss-clip", loss.x0, loss.y0, loss.w, loss.h);
  svg.begin_clipped_group("loss-curves", "loss-clip");
  for (size_t i = 0; i < logs.size(); ++i) {
    Points px;
    for (const auto& [x, y] : steps[i]) px.emplace_back(loss.px(x), loss.py(y));
    svg.polyline(px, {color_of(i), 1.0, 0.35, ""});
  }
  for (size_t i = 0; i < logs.size(); ++i) {
    Points px;
    for (const auto& [x, y] : epochs[i]) px.emplace_back(loss.px(x), loss.py(y));
    // Later runs dashed, so runs that agree exactly still show both curves.
    svg.polyline(px, {color_of(i), 2.5, 1.0, i == 0 ? "" : "8 5"});
    for (const auto& [x, y] : px) svg.circle(x, y, i == 0 ? 4.5 : 3.0, color_of(i));
  }
  svg.end_group();
  svg.end_group();

  if (with_diff) {
    std::vector<Points> diffs;
    double d_lo = std::numeric_limits<double>::infinity(), d_hi = 0.0;
    for (size_t i = 1; i < logs.size(); ++i) {
      diffs.push_back(step_differences(logs[0], logs[i]));
      for (const auto& [x, d] : diffs.back())
        if (d > 0.0) {
          d_lo = std::min(d_lo, d);
          d_hi = std::max(d_hi, d);
        }
    }
    const bool any_positive = d_hi > 0.0;
    bool any_zero = false;
    for (const auto& points : diffs)
      for (const auto& [x, d] : points) any_zero = any_zero || d == 0.0;
    if (!any_positive) d_lo = d_hi = 1e-16;  // all identical: a nominal range
    // Equal losses (difference 0) have no place on a log scale: the axis gets one more
    // decade below the smallest difference, and its bottom edge is labelled 0.
    if (any_zero && any_positive) d_lo /= 10.0;
    Panel diff{kLeft, kTop + kLossHeight + kGap, kPlotWidth, kDiffHeight, loss.x, log_axis(d_lo, d_hi)};
    diff.zero_floor = any_zero;
    svg.begin_group("diff-panel");
    draw_axes(svg, diff, "optimizer step", "|loss - first log's loss|",
              "Per-step absolute difference to " + run_label(logs[0]) + " (log scale)");
    svg.define_clip("diff-clip", diff.x0, diff.y0, diff.w, diff.h);
    svg.begin_clipped_group("diff-curves", "diff-clip");
    for (size_t i = 1; i < logs.size(); ++i) {
      Points px;
      for (const auto& [x, d] : diffs[i - 1])
        px.emplace_back(diff.px(x), d > 0.0 ? diff.py(d) : diff.y0 + diff.h - 1);
      svg.polyline(px, {color_of(i), 1.5, 0.9, ""});
    }
    svg.end_group();
    if (!any_positive)
      svg.text(diff.x0 + diff.w / 2, diff.y0 + diff.h / 2,
               "every logged step's loss is identical to the first log's",
               {13.0, io::Anchor::kMiddle, false, "#555", 0.0});
    svg.end_group();
  }

  svg.begin_group("legend");
  svg.text(kLegendX, kTop + 4, "runs (world size, log file)", {12.0, io::Anchor::kStart, true, "#111", 0.0});
  for (size_t i = 0; i < logs.size(); ++i) {
    const double y = kTop + 26 + 22 * static_cast<double>(i);
    svg.line(kLegendX, y - 4, kLegendX + 26, y - 4, {color_of(i), 2.5, 1.0, i == 0 ? "" : "8 5"});
    svg.text(kLegendX + 32, y, run_label(logs[i]), {11.0, io::Anchor::kStart, false, "#222", 0.0});
  }
  svg.end_group();
  return svg.finish();
}

}  // namespace mpiddp::analysis
