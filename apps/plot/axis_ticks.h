// Axis ticks: "nice" round values (1, 2, 5 x 10^k) covering a data range on
// linear and log axes, and their labels with just the digits they need.
#pragma once
#include <string>
#include <vector>

namespace ember::apps {

// Tick values covering [lo, hi]: multiples of step (1, 2 or 5 x 10^k) from
// lo' <= lo to hi' >= hi, about `target` of them (Heckbert's "nice numbers").
// lo == hi gives a small range around the value. Non-finite bounds: ember::Error.
struct Ticks {
  double lo = 0, hi = 1, step = 1;  // the axis range [lo, hi] (the outer ticks)
  std::vector<double> values;
};
Ticks nice_ticks(double lo, double hi, int target = 5);
// Ticks for a log axis over [lo, hi], lo > 0: 1-2-5 x 10^k (or only powers of
// ten) when the range spans a decade or more, else nice linear values.
// step is 0 (the labels use each value's own precision).
Ticks log_ticks(double lo, double hi);
// A tick label with the digits step needs: "0.25", "1500", "2.5M" (k, M, G
// above 10^4), "3e-4" (below 10^-2). step 0: the value's own precision.
std::string format_tick(double value, double step, double axis_max_abs);

}  // namespace ember::apps
