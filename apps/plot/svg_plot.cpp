// Line charts as standalone SVG (see svg_plot.h).
#include "apps/plot/svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace ember::apps {
namespace {

std::string printf_string(const char* format, double value, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, digits, value);
  return buf;
}

constexpr const char* kFont = "Helvetica, Arial, 'DejaVu Sans', sans-serif";

struct Box {
  double x0, y0, x1, y1;  // pixels; y grows downwards
};

struct Axis {
  Ticks ticks;
  bool log = false;
  double map(double v, double p0, double p1) const {
    const double a = log ? std::log10(ticks.lo) : ticks.lo,
                 b = log ? std::log10(ticks.hi) : ticks.hi;
    const double t = ((log ? std::log10(v) : v) - a) / (b - a);
    return p0 + t * (p1 - p0);
  }
  double max_abs() const { return std::max(std::fabs(ticks.lo), std::fabs(ticks.hi)); }
};

// Points drawable on these axes: finite, and positive on a log axis.
std::vector<std::pair<double, double>> usable_points(const Series& s, bool log_y) {
  std::vector<std::pair<double, double>> out;
  for (const auto& [x, y] : s.points) {
    if (std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0)) out.emplace_back(x, y);
  }
  return out;
}

// Keeps, of each run of points in the same pixel column, the first, the lowest,
// the highest and the last (in their order), so the line's envelope survives.
std::vector<std::pair<double, double>> thin_to_columns(
    const std::vector<std::pair<double, double>>& pixels) {
  std::vector<std::pair<double, double>> out;
  size_t begin = 0;
  while (begin < pixels.size()) {
    size_t end = begin + 1;
    const long column = std::lround(pixels[begin].first);
    while (end < pixels.size() && std::lround(pixels[end].first) == column) ++end;
    size_t lo = begin, hi = begin;
    for (size_t i = begin; i < end; ++i) {
      if (pixels[i].second < pixels[lo].second) lo = i;
      if (pixels[i].second > pixels[hi].second) hi = i;
    }
    std::vector<size_t> keep = {begin, lo, hi, end - 1};
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    for (size_t i : keep) out.push_back(pixels[i]);
    begin = end;
  }
  return out;
}

// Dashed lines (validation: few points, the trend) are drawn heavier than solid ones (noisy train
// loss).
std::string stroke_style(const std::string& color, bool dashed, double opacity = 1) {
  std::string s = "fill=\"none\" stroke=\"" + xml_escape(color) + "\" stroke-linejoin=\"round\"";
  s += dashed ? " stroke-width=\"2.4\" stroke-dasharray=\"7,4\"" : " stroke-width=\"1.4\"";
  if (opacity < 1) s += " stroke-opacity=\"" + printf_string("%.*f", opacity, 2) + "\"";
  return s;
}

std::string num(double v) {
  return printf_string("%.*f", v, 1);
}

void draw_panel(std::ostringstream& svg, const Panel& panel, const Box& cell) {
  const Box plot{cell.x0 + 74, cell.y0 + 30, cell.x1 - 22, cell.y1 - 50};
  svg << "<text x=\"" << num(plot.x0) << "\" y=\"" << num(plot.y0 - 10)
      << "\" font-size=\"14\" font-weight=\"bold\">" << xml_escape(panel.title) << "</text>\n";
  svg << "<text x=\"" << num((plot.x0 + plot.x1) / 2) << "\" y=\"" << num(plot.y1 + 40)
      << "\" text-anchor=\"middle\">" << xml_escape(panel.x_title) << "</text>\n";
  const double mid_y = (plot.y0 + plot.y1) / 2;
  svg << "<text x=\"" << num(cell.x0 + 16) << "\" y=\"" << num(mid_y)
      << "\" text-anchor=\"middle\" transform=\"rotate(-90 " << num(cell.x0 + 16) << " "
      << num(mid_y) << ")\">" << xml_escape(panel.y_title) << "</text>\n";

  std::vector<std::vector<std::pair<double, double>>> data;
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& s : panel.series) {
    data.push_back(usable_points(s, panel.log_y));
    for (const auto& [x, y] : data.back()) {
      x_lo = std::min(x_lo, x), x_hi = std::max(x_hi, x);
      y_lo = std::min(y_lo, y), y_hi = std::max(y_hi, y);
    }
  }
  svg << "<rect x=\"" << num(plot.x0) << "\" y=\"" << num(plot.y0) << "\" width=\""
      << num(plot.x1 - plot.x0) << "\" height=\"" << num(plot.y1 - plot.y0)
      << "\" fill=\"#ffffff\" stroke=\"#444444\"/>\n";
  if (!(x_lo <= x_hi)) {
    svg << "<text x=\"" << num((plot.x0 + plot.x1) / 2) << "\" y=\"" << num(mid_y)
        << "\" text-anchor=\"middle\" fill=\"#888888\">no data</text>\n";
    return;
  }
  if (panel.y_from_zero && !panel.log_y) y_lo = std::min(y_lo, 0.0), y_hi = std::max(y_hi, 0.0);
  const int x_target = std::max(3, static_cast<int>((plot.x1 - plot.x0) / 80));
  const int y_target = std::max(3, static_cast<int>((plot.y1 - plot.y0) / 40));
  const Axis ax{nice_ticks(x_lo, x_hi, x_target), false};
  const Axis ay{panel.log_y ? log_ticks(y_lo, y_hi) : nice_ticks(y_lo, y_hi, y_target),
                panel.log_y};

  svg << "<g font-size=\"12\" fill=\"#333333\">\n";
  for (double v : ax.ticks.values) {
    const double px = ax.map(v, plot.x0, plot.x1);
    svg << "<line x1=\"" << num(px) << "\" y1=\"" << num(plot.y0) << "\" x2=\"" << num(px)
        << "\" y2=\"" << num(plot.y1 + 5) << "\" stroke=\"#e4e4e4\"/>\n<text x=\"" << num(px)
        << "\" y=\"" << num(plot.y1 + 19) << "\" text-anchor=\"middle\">"
        << format_tick(v, ax.ticks.step, ax.max_abs()) << "</text>\n";
  }
  for (double v : ay.ticks.values) {
    const double py = ay.map(v, plot.y1, plot.y0);
    svg << "<line x1=\"" << num(plot.x0 - 5) << "\" y1=\"" << num(py) << "\" x2=\"" << num(plot.x1)
        << "\" y2=\"" << num(py) << "\" stroke=\"#e4e4e4\"/>\n<text x=\"" << num(plot.x0 - 8)
        << "\" y=\"" << num(py + 4) << "\" text-anchor=\"end\">"
        << format_tick(v, ay.ticks.step, ay.max_abs()) << "</text>\n";
  }
  svg << "</g>\n";
  svg << "<rect x=\"" << num(plot.x0) << "\" y=\"" << num(plot.y0) << "\" width=\""
      << num(plot.x1 - plot.x0) << "\" height=\"" << num(plot.y1 - plot.y0)
      << "\" fill=\"none\" stroke=\"#444444\"/>\n";

  std::vector<size_t> order(panel.series.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto layer = [&](size_t i) {
    return panel.series[i].opacity < 1 ? 0 : panel.series[i].dashed ? 2 : 1;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return layer(a) < layer(b); });
  for (size_t i : order) {
    const Series& s = panel.series[i];
    std::vector<std::pair<double, double>> pixels;
    for (const auto& [x, y] : data[i])
      pixels.emplace_back(ax.map(x, plot.x0, plot.x1), ay.map(y, plot.y1, plot.y0));
    if (pixels.empty()) continue;
    if (pixels.size() > 2 * static_cast<size_t>(plot.x1 - plot.x0))
      pixels = thin_to_columns(pixels);
    if (pixels.size() > 1) {
      svg << "<polyline " << stroke_style(s.color, s.dashed, s.opacity) << " points=\"";
      for (size_t j = 0; j < pixels.size(); ++j)
        svg << (j ? " " : "") << num(pixels[j].first) << "," << num(pixels[j].second);
      svg << "\"/>\n";
    }
    if (s.markers || pixels.size() == 1) {
      svg << "<g fill=\"" << xml_escape(s.color) << "\">";
      for (const auto& [px, py] : pixels)
        svg << "<circle cx=\"" << num(px) << "\" cy=\"" << num(py) << "\" r=\"3.6\"/>";
      svg << "</g>\n";
    }
  }
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::string render_svg(const Figure& f) {
  const int columns = std::max(1, f.columns);
  const size_t rows =
      (f.panels.size() + static_cast<size_t>(columns) - 1) / static_cast<size_t>(columns);
  const double title_h = f.subtitle.empty() ? 46 : 62, pad = 10, legend_row_h = 22;
  // Legend columns as wide as the longest label (about 7 px a character);
  // an even count per row when possible, so entries that come in pairs stay together.
  size_t longest = 0;
  for (const LegendEntry& e : f.legend) longest = std::max(longest, e.label.size());
  const double legend_column_w = 66 + 7.2 * static_cast<double>(longest);
  size_t per_row =
      std::max<size_t>(1, static_cast<size_t>((f.width - 2 * pad - 74) / legend_column_w));
  if (per_row > 1 && per_row % 2) --per_row;
  const size_t legend_rows = (f.legend.size() + per_row - 1) / per_row;
  double height = title_h;
  for (size_t r = 0; r < rows; ++r) height += r < f.row_heights.size() ? f.row_heights[r] : 300;
  height += static_cast<double>(legend_rows) * legend_row_h + (legend_rows ? 20 : 0) + pad;

  std::ostringstream svg;
  svg << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" << f.width
      << "\" height=\"" << num(height) << "\" viewBox=\"0 0 " << f.width << " " << num(height)
      << "\">\n"
      << "<rect x=\"0\" y=\"0\" width=\"" << f.width << "\" height=\"" << num(height)
      << "\" fill=\"#ffffff\"/>\n"
      << "<g font-family=\"" << kFont << "\" font-size=\"13\" fill=\"#222222\">\n"
      << "<text x=\"" << f.width / 2
      << "\" y=\"30\" text-anchor=\"middle\" font-size=\"18\" font-weight=\"bold\">"
      << xml_escape(f.title) << "</text>\n";
  if (!f.subtitle.empty()) {
    svg << "<text x=\"" << f.width / 2
        << "\" y=\"50\" text-anchor=\"middle\" font-size=\"12\" fill=\"#666666\">"
        << xml_escape(f.subtitle) << "</text>\n";
  }
  const double cell_w = (f.width - 2 * pad) / columns;
  double y = title_h;
  for (size_t r = 0; r < rows; ++r) {
    const double h = r < f.row_heights.size() ? f.row_heights[r] : 300;
    for (int c = 0; c < columns; ++c) {
      const size_t i = r * static_cast<size_t>(columns) + static_cast<size_t>(c);
      if (i >= f.panels.size()) break;
      const double x = pad + c * cell_w;
      draw_panel(svg, f.panels[i], Box{x, y, x + cell_w, y + h});
    }
    y += h;
  }
  y += 10;
  for (size_t i = 0; i < f.legend.size(); ++i) {
    const LegendEntry& e = f.legend[i];
    const double x = pad + 74 + static_cast<double>(i % per_row) * legend_column_w;
    const double ly = y + static_cast<double>(i / per_row) * legend_row_h + 8;
    svg << "<line x1=\"" << num(x) << "\" y1=\"" << num(ly) << "\" x2=\"" << num(x + 34)
        << "\" y2=\"" << num(ly) << "\" " << stroke_style(e.color, e.dashed) << "/>";
    if (e.markers)
      svg << "<circle cx=\"" << num(x + 17) << "\" cy=\"" << num(ly) << "\" r=\"3.6\" fill=\""
          << xml_escape(e.color) << "\"/>";
    svg << "<text x=\"" << num(x + 42) << "\" y=\"" << num(ly + 4.5) << "\">" << xml_escape(e.label)
        << "</text>\n";
  }
  svg << "</g>\n</svg>\n";
  return svg.str();
}

}  // namespace ember::apps
