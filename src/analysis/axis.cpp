#include "mpiddp/analysis/axis.hpp"

#include <cmath>
#include <cstdio>

namespace mpiddp::analysis {

double Axis::to_pixel(double value, double p_lo, double p_hi) const {
  double t = 0.0;
  if (log) t = value > 0.0 ? (std::log10(value) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) : 0.0;
  else t = (value - lo) / (hi - lo);
  return p_lo + t * (p_hi - p_lo);
}

Axis linear_axis(double min, double max, int target) {
  if (!(max > min)) {  // one value (or none): a unit-wide range around it
    const double half = min == 0.0 ? 1.0 : std::fabs(min) * 0.1;
    min -= half;
    max += half;
  }
  // The step: the 1-2-5 multiple of a power of ten nearest above range / target.
  const double raw = (max - min) / target;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * power;
    if (step >= raw) break;
  }
  Axis axis;
  axis.lo = std::floor(min / step) * step;
  axis.hi = std::ceil(max / step) * step;
  const auto count = static_cast<long>(std::llround((axis.hi - axis.lo) / step));
  for (long i = 0; i <= count; ++i) {
    const double tick = axis.lo + static_cast<double>(i) * step;
    axis.ticks.push_back(std::fabs(tick) < step * 1e-9 ? 0.0 : tick);  // no "-1.4e-17"
  }
  return axis;
}

Axis log_axis(double min, double max, int max_ticks) {
  Axis axis;
  axis.log = true;
  int first = static_cast<int>(std::floor(std::log10(min)));
  int last = static_cast<int>(std::ceil(std::log10(max)));
  if (last == first) ++last;
  axis.lo = std::pow(10.0, first);
  axis.hi = std::pow(10.0, last);
  const int every = (last - first) / max_ticks + 1;
  for (int k = first; k <= last; k += every) axis.ticks.push_back(std::pow(10.0, k));
  return axis;
}

std::string tick_label(double value) {
  char text[32];
  if (value != 0.0 && (std::fabs(value) < 1e-3 || std::fabs(value) >= 1e5))
    std::snprintf(text, sizeof text, "%.0e", value);
  else
    std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace mpiddp::analysis
