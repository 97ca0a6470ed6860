// Line charts as standalone SVG 1.1 (no scripts, fonts or CSS: any browser or
// image viewer shows them): a figure is a grid of panels, each with axes on
// "nice" round ticks, grid lines, axis titles and polylines; one legend below.
#pragma once
#include <string>
#include <utility>
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

struct Series {
  std::string color = "#1f77b4";
  bool dashed = false;
  bool markers = false;                         // a small circle on every point
  double opacity = 1;                           // < 1: a faint background line, drawn first
  std::vector<std::pair<double, double>> points;  // (x, y), non-finite ones skipped
};

struct Panel {
  std::string title, x_title, y_title;
  bool log_y = false;
  bool y_from_zero = false;  // the y range includes 0 (learning rate)
  std::vector<Series> series;
};

struct LegendEntry {
  std::string label, color;
  bool dashed = false, markers = false;
};

struct Figure {
  std::string title;
  std::string subtitle;  // a note under the title (may be empty)
  int columns = 2;
  std::vector<Panel> panels;        // row by row
  std::vector<double> row_heights;  // pixels, one per row (missing rows: 300)
  int width = 1100;
  std::vector<LegendEntry> legend;
};

// The whole SVG document. Faint series are drawn first, dashed ones last (on
// top). Series of more points than twice the panel's pixel columns are
// thinned to each column's first/min/max/last, which keeps spikes.
std::string render_svg(const Figure& figure);
// Text escaped for SVG content and attribute values.
std::string xml_escape(const std::string& text);

}  // namespace ember::apps
