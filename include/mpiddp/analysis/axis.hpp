#pragma once
// Axis ranges and tick positions for the plots: "nice" linear ticks (1, 2, 5 times a power
// of ten) and decade ticks on a log scale.
#include <string>
#include <vector>

namespace mpiddp::analysis {

struct Axis {
  double lo = 0.0, hi = 1.0;  // the data range shown (on a log axis: lo > 0)
  bool log = false;
  std::vector<double> ticks;  // within [lo, hi], increasing

  // Maps a value to the pixel range [p_lo, p_hi] (p_hi < p_lo for a y axis growing upwards).
  // Values outside the range map outside the pixel range; on a log axis values <= 0 map
  // to p_lo.
  double to_pixel(double value, double p_lo, double p_hi) const;
};

// Ticks at multiples of a 1-2-5 step, about `target` of them, with the range widened to
// the enclosing ticks. An empty range (min == max) is widened around the value.
Axis linear_axis(double min, double max, int target = 6);

// Decade ticks (10^k) with the range widened to whole decades; min must be > 0. When more
// than `max_ticks` decades, every second (third, ...) decade is ticked.
Axis log_axis(double min, double max, int max_ticks = 8);

// Short tick label: "0.25", "1200", "1e-06".
std::string tick_label(double value);

}  // namespace mpiddp::analysis
