// Line charts as standalone SVG 1.1 (no scripts, fonts or CSS: any browser or
// image viewer shows them): a figure is a grid of panels, each with axes on
// "nice" round ticks, grid lines, axis titles and polylines; one legend below.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "apps/plot/axis_ticks.h"

namespace ember::apps {

struct Series {
  std::string color = "#1f77b4";
  bool dashed = false;
  bool markers = false;                           // a small circle on every point
  double opacity = 1;                             // < 1: a faint background line, drawn first
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
