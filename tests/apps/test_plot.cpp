// `ember plot` and the end-of-run loss.svg: nice ticks and tick labels against
// hand-computed cases, the SVG's well-formedness, legend, polylines and point
// counts from hand-written metrics.jsonl files, resumed runs, thinning, and
// every error case; `ember train` writing loss.svg without ever failing on it.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "apps/cli/commands.h"
#include "apps/plot/svg_plot.h"
#include "apps/train/trainer.h"
#include "apps/plot/training_plot.h"
#include "core/error.h"
#include "data/token_shard.h"
#include "temp_dir.h"

using namespace ember;
using namespace ember::apps;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;
using testing::read_text;

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A run folder whose metrics.jsonl has train records at steps [first, last]
// (tokens = 256 x step, loss 10 / step, lr 1e-3) and validation every 10th step.
std::string metrics_lines(int first, int last) {
  std::string text;
  for (int s = first; s <= last; ++s) {
    text += "{\"step\":" + std::to_string(s) + ",\"tokens\":" + std::to_string(256 * s) +
            ",\"loss\":" + std::to_string(10.0 / s) + ",\"lr\":0.001";
    if (s % 10 == 0) text += ",\"val_loss\":" + std::to_string(12.0 / s);
    text += "}\n";
  }
  return text;
}

// Minimal XML check: every start tag is closed in order, one root <svg>, no
// stray '<' or '&' in text (entities are &amp; &lt; &gt; &quot; &apos;).
bool well_formed(const std::string& xml, std::string& why) {
  std::vector<std::string> open;
  size_t i = 0, roots = 0;
  if (xml.rfind("<?xml", 0) == 0) i = xml.find("?>") + 2;
  while (i < xml.size()) {
    if (xml[i] == '&') {
      static const std::regex entity("^&(amp|lt|gt|quot|apos);");
      if (!std::regex_search(xml.substr(i, 8), entity))
        return why = "bad entity at " + std::to_string(i), false;
      ++i;
      continue;
    }
    if (xml[i] != '<') {
      ++i;
      continue;
    }
    const size_t end = xml.find('>', i);
    if (end == std::string::npos) return why = "unclosed tag", false;
    std::string tag = xml.substr(i + 1, end - i - 1);
    if (tag.find('<') != std::string::npos) return why = "'<' inside a tag: " + tag, false;
    if (std::count(tag.begin(), tag.end(), '"') % 2)
      return why = "unbalanced quotes: " + tag, false;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name)
        return why = "</" + name + "> closes nothing open", false;
      open.pop_back();
    } else {
      const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
      if (open.empty() && ++roots > 1) return why = "two root elements", false;
      if (open.empty() && name != "svg") return why = "root is " + name, false;
      if (tag.back() != '/') open.push_back(name);
    }
    i = end + 1;
  }
  if (!open.empty()) return why = "<" + open.back() + "> never closed", false;
  return roots == 1 || (why = "no root", false);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t i = text.find(what); i != std::string::npos; i = text.find(what, i + 1)) ++n;
  return n;
}

// An attribute's value in every <tag ...> element (no std::regex: it
// recurses per character and overflows the stack on long point lists).
std::vector<std::string> attribute_values(const std::string& svg, const std::string& tag,
                                          const std::string& name) {
  std::vector<std::string> out;
  for (size_t i = svg.find("<" + tag + " "); i != std::string::npos;
       i = svg.find("<" + tag + " ", i + 1)) {
    const size_t end = svg.find('>', i);
    const size_t at = svg.find(" " + name + "=\"", i);
    if (at == std::string::npos || at > end) continue;
    const size_t begin = at + name.size() + 3;
    out.push_back(svg.substr(begin, svg.find('"', begin) - begin));
  }
  return out;
}

// The points attribute of every <polyline>, as (x, y) lists.
std::vector<std::vector<std::pair<double, double>>> polylines(const std::string& svg) {
  std::vector<std::vector<std::pair<double, double>>> out;
  for (const std::string& value : attribute_values(svg, "polyline", "points")) {
    std::istringstream points(value);
    std::vector<std::pair<double, double>> p;
    double x, y;
    char comma;
    while (points >> x >> comma >> y) p.emplace_back(x, y);
    out.push_back(p);
  }
  return out;
}

std::string svg_of(const std::string& dir) {
  write_training_plot({dir}, dir + "/plot.svg");
  return read_text(dir + "/plot.svg");
}

}  // namespace

TEST_CASE("nice_ticks: 1, 2, 5 x 10^k steps covering the range", "[plot]") {
  using V = std::vector<double>;
  auto values = [](double lo, double hi, int target) { return nice_ticks(lo, hi, target).values; };
  // (hi - lo) / (target - 1) rounded to the nearest 1, 2, 5 (cut at 1.5, 3, 7) x 10^k.
  CHECK(values(0, 60, 4) == V{0, 20, 40, 60});                    // 20 -> 20
  CHECK(values(1, 60, 4) == V{0, 20, 40, 60});                    // 19.67 -> 20
  CHECK(values(60, 1, 4) == V{0, 20, 40, 60});                    // swapped bounds
  CHECK(values(0, 15360, 6) == V{0, 5000, 10000, 15000, 20000});  // 3072 -> 5000
  CHECK(values(-1, 1, 5) == V{-1, -0.5, 0, 0.5, 1});              // 0.5
  const Ticks loss = nice_ticks(2.86, 5.52, 7);                   // 0.443 -> 0.5
  CHECK(loss.step == 0.5);
  REQUIRE(loss.values.size() == 8);
  CHECK(loss.lo == 2.5);
  CHECK(loss.hi == 6.0);
  const Ticks lr = nice_ticks(0, 3e-4, 4);  // 1e-4
  REQUIRE(lr.values.size() == 4);
  CHECK(lr.values[3] == Approx(3e-4).epsilon(1e-12));
  const Ticks neg = nice_ticks(-0.3, 0.7, 6);  // 0.2: -0.4 .. 0.8
  CHECK(neg.lo == Approx(-0.4));
  CHECK(neg.hi == Approx(0.8));
  CHECK(neg.values.size() == 7);
  CHECK(neg.values[2] == 0.0);
  CHECK_FALSE(std::signbit(neg.values[2]));  // "0", not "-0"
  // A single value: +-10% around it (+-1 around 0).
  CHECK(values(0, 0, 5) == V{-1, -0.5, 0, 0.5, 1});
  const Ticks one = nice_ticks(5, 5, 5);  // [4.5, 5.5] by 0.2
  CHECK(one.lo == Approx(4.4));
  CHECK(one.hi == Approx(5.6));
  // Always covering, whatever the range.
  for (double lo : {-1234.5, -0.0031, 0.0, 0.17, 3.0, 98765.0}) {
    for (double span : {1e-5, 0.3, 7.0, 450.0, 2.5e6}) {
      for (int target : {2, 3, 5, 9}) {
        const Ticks t = nice_ticks(lo, lo + span, target);
        CHECK(t.lo <= lo + 1e-6 * t.step);  // equal up to rounding
        CHECK(t.hi >= lo + span - 1e-6 * t.step);
        CHECK(t.values.size() >= 2);
        CHECK(t.values.size() <= static_cast<size_t>(3 * target + 2));
      }
    }
  }
  CHECK_THROWS_AS(nice_ticks(0, INFINITY), Error);
  CHECK_THROWS_AS(nice_ticks(NAN, 1), Error);
}

TEST_CASE("log_ticks: 1-2-5 per decade, decades only when many, linear within a decade", "[plot]") {
  using V = std::vector<double>;
  const V wide = log_ticks(0.02, 3).values;
  const V expected{0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5};
  REQUIRE(wide.size() == expected.size());
  for (size_t i = 0; i < wide.size(); ++i) CHECK(wide[i] == Approx(expected[i]));
  const V decades = log_ticks(1e-6, 1e3).values;  // 1-2-5 would be 28 ticks
  REQUIRE(decades.size() == 10);
  CHECK(decades.front() == Approx(1e-6));
  CHECK(decades.back() == Approx(1e3));
  const Ticks narrow = log_ticks(2.9, 5.5);  // linear, by 0.5
  CHECK(narrow.step == 0.5);
  CHECK(narrow.values == V{2.5, 3, 3.5, 4, 4.5, 5, 5.5});
  const V near_zero = log_ticks(0.05, 0.4).values;  // linear would start at 0
  REQUIRE(near_zero.size() == 4);
  CHECK(near_zero[0] == Approx(0.05));
  CHECK(near_zero[3] == Approx(0.5));
  CHECK_THROWS_AS(log_ticks(0, 1), Error);
}

TEST_CASE("format_tick: the digits the step needs, k/M/G above 10^4, e-notation below 10^-2",
          "[plot]") {
  CHECK(format_tick(2.5, 0.5, 6) == "2.5");
  CHECK(format_tick(3, 0.5, 6) == "3.0");
  CHECK(format_tick(-0.4, 0.2, 0.8) == "-0.4");
  CHECK(format_tick(40, 20, 60) == "40");
  CHECK(format_tick(8000, 2000, 8000) == "8000");
  CHECK(format_tick(15000, 5000, 20000) == "15k");
  CHECK(format_tick(1.5e6, 5e5, 2e6) == "1.5M");
  CHECK(format_tick(1e6, 5e5, 2e6) == "1M");
  CHECK(format_tick(3e9, 1e9, 4e9) == "3G");
  CHECK(format_tick(0, 5e5, 2e6) == "0");
  CHECK(format_tick(2e-4, 1e-4, 3e-4) == "2e-4");
  CHECK(format_tick(1.5e-4, 5e-5, 2e-4) == "1.5e-4");
  CHECK(format_tick(0.02, 0, 5) == "0.02");
  CHECK(format_tick(2e-5, 0, 1e-3) == "2e-5");
  CHECK(format_tick(500, 0, 1000) == "500");
  CHECK(format_tick(20000, 0, 1e5) == "20k");
}

TEST_CASE(
    "the plot of one run: well-formed SVG 1.1, legend, one polyline per curve, ticks over the data",
    "[plot]") {
  TempDir dir("plot");
  write_text(dir / "quick/metrics.jsonl", metrics_lines(1, 30));
  const std::string svg = svg_of(dir / "quick");
  std::string why;
  CHECK(well_formed(svg, why));
  INFO(why);
  CHECK(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\"") != std::string::npos);
  for (const char* banned : {"<script", "href", "@import", "<style", "url("})
    CHECK(svg.find(banned) == std::string::npos);
  CHECK(count(svg, ">quick: train loss, learning rate</text>") == 1);
  CHECK(count(svg, ">quick: validation loss</text>") == 1);
  // Loss (train, validation) and learning rate, against steps and against tokens.
  const auto lines = polylines(svg);
  REQUIRE(lines.size() == 6);
  std::vector<size_t> sizes;
  for (const auto& l : lines) sizes.push_back(l.size());
  CHECK(sizes == std::vector<size_t>{30, 3, 30, 3, 30, 30});
  // 3 validation markers in each loss panel and one in the legend.
  CHECK(count(svg, "<circle") == 7);
  // Steps 1..30 on 0..30 by 10 (444 px wide: target 5, 29 / 4 -> 10); tokens
  // 256..7680 on 0..8000 by 2000; loss 0.33..10 by 1 (target 8, 9.67/7 -> 1);
  // learning rate 0..1e-3 by 5e-4 (target 3).
  for (const char* label : {">30</text>", ">8000</text>", ">2000</text>", ">10</text>", ">0</text>",
                            ">5e-4</text>", ">1e-3</text>"}) {
    CHECK(svg.find(label) != std::string::npos);
    INFO(label);
  }
  CHECK(svg.find(">40</text>") == std::string::npos);
  // Every point lies inside its panel: x within the panel columns, y above the x axis.
  for (const auto& l : lines) {
    for (const auto& [x, y] : l) {
      CHECK(x >= 84);
      CHECK(x <= 1100 - 10 - 22);
      CHECK(y >= 46 + 30);
    }
  }
}

TEST_CASE("several runs: a colour and legend entries each, same folder names use the paths",
          "[plot]") {
  TempDir dir("plot");
  write_text(dir / "a/run/metrics.jsonl", metrics_lines(1, 20));
  write_text(dir / "b/run/metrics.jsonl", metrics_lines(1, 40));
  write_text(dir / "c/metrics.jsonl", metrics_lines(5, 25));
  write_training_plot({dir / "a/run", dir / "b/run", dir / "c"}, dir / "all.svg");
  const std::string svg = read_text(dir / "all.svg");
  std::string why;
  CHECK(well_formed(svg, why));
  CHECK(polylines(svg).size() == 18);
  CHECK(svg.find(">" + (dir / "a/run") + ": validation loss</text>") != std::string::npos);
  CHECK(svg.find(">" + (dir / "b/run") + ": validation loss</text>") != std::string::npos);
  CHECK(svg.find(">c: validation loss</text>") != std::string::npos);
  const std::vector<std::string> strokes = attribute_values(svg, "polyline", "stroke");
  CHECK(std::set<std::string>(strokes.begin(), strokes.end()).size() == 3);
}

TEST_CASE("a resumed run's repeated steps replace the earlier ones, a cut last line is ignored",
          "[plot]") {
  TempDir dir("plot");
  // Ran to 25 (validation at 10, 20), resumed from the step-12 checkpoint to 30, killed mid-line.
  write_text(dir / "r/metrics.jsonl",
             metrics_lines(1, 25) + metrics_lines(13, 30) + "{\"step\":31,\"lo");
  const RunMetrics run = read_run_metrics(dir / "r");
  REQUIRE(run.train_loss.size() == 30);
  for (size_t i = 0; i < run.train_loss.size(); ++i)
    CHECK(run.train_loss[i].step == static_cast<double>(i + 1));
  CHECK(run.lr.size() == 30);
  REQUIRE(run.val_loss.size() == 3);
  CHECK(run.val_loss[2].step == 30);
  CHECK(run.val_loss[2].tokens == 256 * 30);
  // Validation on lines of its own: tokens taken from the same step's train record.
  write_text(dir / "v/metrics.jsonl",
             "{\"step\":1,\"tokens\":64,\"loss\":5,\"lr\":1}\n{\"step\":1,\"val_loss\":4.5}\n"
             "{\"event\":\"note\"}\n\n{\"step\":2,\"tokens\":128,\"loss\":4,\"lr\":1}\n");
  const RunMetrics v = read_run_metrics(dir / "v");
  CHECK(v.train_loss.size() == 2);
  REQUIRE(v.val_loss.size() == 1);
  CHECK(v.val_loss[0].tokens == 64);
}

TEST_CASE("log loss axis and thinning of long runs", "[plot]") {
  TempDir dir("plot");
  write_text(dir / "long/metrics.jsonl", metrics_lines(1, 5000));
  write_training_plot({dir / "long"}, dir / "long.svg", TrainingPlotOptions{true});
  const std::string svg = read_text(dir / "long.svg");
  std::string why;
  CHECK(well_formed(svg, why));
  CHECK(svg.find("log scale") != std::string::npos);
  // Per loss panel: raw train loss (faint, drawn first), its moving average, validation; then
  // learning rates.
  const auto lines = polylines(svg);
  REQUIRE(lines.size() == 8);
  CHECK(count(svg, "stroke-opacity=\"0.30\"") == 2);
  CHECK(svg.find("moving average") != std::string::npos);
  // 5000 train points on a 444-pixel axis: at most 4 kept per pixel column.
  CHECK(lines[0].size() < 4 * 446);
  CHECK(lines[0].size() > 400);
  CHECK(lines[1].size() < 4 * 446);
  CHECK(lines[2].size() == 500);      // validation points are fewer than 2 per column: all kept
  CHECK(count(svg, "<circle") == 1);  // 500 markers would hide the line: only the legend's
  // Loss 0.002..10 on a log axis: 1-2-5 ticks from 0.002 to 10.
  for (const char* label :
       {">0.002</text>", ">0.005</text>", ">0.01</text>", ">0.02</text>", ">0.5</text>"}) {
    CHECK(svg.find(label) != std::string::npos);
  }

  // A spike survives thinning: the top tick (100) is the panel's top edge, y = 46 + 30.
  Figure f;
  f.columns = 1;
  f.row_heights = {300};
  Series s;
  for (int i = 0; i < 10000; ++i) s.points.emplace_back(i, i == 4321 ? 100.0 : 1.0 + (i % 7) * 0.1);
  f.panels.push_back(Panel{"spike", "x", "y", false, false, {s}});
  const auto spike = polylines(render_svg(f));
  REQUIRE(spike.size() == 1);
  double top = 1e9;
  for (const auto& p : spike[0]) top = std::min(top, p.second);
  CHECK(top == 76.0);
  CHECK(spike[0].size() < 10000 / 2);
}

TEST_CASE("long runs: train loss smoothed by a debiased moving average over 2% of the steps",
          "[plot]") {
  TempDir dir("plot");
  write_text(dir / "short/metrics.jsonl", metrics_lines(1, 200));
  write_text(dir / "long/metrics.jsonl", metrics_lines(1, 250));
  const Figure f =
      training_figure({read_run_metrics(dir / "short"), read_run_metrics(dir / "long")}, {});
  // short (200 steps): train, validation; long: raw train (faint), smoothed, validation.
  const std::vector<Series>& loss = f.panels[0].series;
  REQUIRE(loss.size() == 5);
  CHECK(loss[0].opacity == 1);
  CHECK(loss[2].opacity < 1);
  CHECK(loss[3].opacity == 1);
  CHECK(loss[4].dashed);
  // span 250 / 50 = 5, w = 0.8: m_k = 0.8 m_(k-1) + 0.2 v_k, shown as m_k / (1 - 0.8^k).
  REQUIRE(loss[3].points.size() == 250);
  double m = 0, power = 1;
  for (int k = 1; k <= 250; ++k) {
    m = 0.8 * m + 0.2 * std::stod(std::to_string(10.0 / k));  // the file holds 6 decimals
    power *= 0.8;
    CHECK(loss[3].points[k - 1].first == k);
    CHECK(loss[3].points[k - 1].second == Approx(m / (1 - power)).epsilon(1e-6));
  }
  CHECK(loss[3].points[0].second ==
        Approx(10.0).epsilon(1e-6));  // debiased: starts at the first value
  CHECK_FALSE(f.subtitle.empty());
}

TEST_CASE("text is escaped, an empty panel says no data", "[plot]") {
  CHECK(xml_escape("a<b & \"c\"\x01") == "a&lt;b &amp; &quot;c&quot;");
  Figure f;
  f.title = "<&>";
  f.panels.push_back(Panel{"empty", "x", "y", false, false, {Series{}}});
  f.legend.push_back({"run <1> & co", "#000000", false, false});
  const std::string svg = render_svg(f);
  std::string why;
  CHECK(well_formed(svg, why));
  INFO(why);
  CHECK(svg.find("no data") != std::string::npos);
  CHECK(svg.find("run &lt;1&gt; &amp; co") != std::string::npos);
}

TEST_CASE("missing, empty or malformed metrics give one clear error", "[plot]") {
  TempDir dir("plot");
  CHECK_THROWS_WITH(read_run_metrics(dir / "nope"),
                    Catch::Contains("nope") && Catch::Contains("no such run folder"));
  fs::create_directories(dir / "bare");
  CHECK_THROWS_WITH(read_run_metrics(dir / "bare"),
                    Catch::Contains("bare/metrics.jsonl") && Catch::Contains("no such file"));
  write_text(dir / "empty/metrics.jsonl", "");
  CHECK_THROWS_WITH(read_run_metrics(dir / "empty"), Catch::Contains("empty/metrics.jsonl: empty"));
  write_text(dir / "bad/metrics.jsonl", metrics_lines(1, 1) + "not json\n" + metrics_lines(2, 2));
  CHECK_THROWS_WITH(read_run_metrics(dir / "bad"),
                    Catch::Contains("bad/metrics.jsonl line 2: not a JSON object"));
  write_text(dir / "type/metrics.jsonl", "{\"step\":1,\"loss\":\"high\"}\n");
  CHECK_THROWS_WITH(read_run_metrics(dir / "type"),
                    Catch::Contains("line 1: \"loss\" is not a number"));
  write_text(dir / "noloss/metrics.jsonl", "{\"step\":1,\"lr\":0.1}\n");
  CHECK_THROWS_WITH(read_run_metrics(dir / "noloss"), Catch::Contains("holds no loss record"));
  write_text(dir / "ok/metrics.jsonl", metrics_lines(1, 3));
  CHECK_THROWS_WITH(write_training_plot({dir / "ok"}, dir / "no/such/dir/x.svg"),
                    Catch::Contains("cannot write"));
  // The trainer's variant warns and never throws.
  CHECK_NOTHROW(write_run_plot_or_warn(dir / "empty", "train"));
  CHECK_FALSE(fs::exists(dir / "empty/loss.svg"));
  write_run_plot_or_warn(dir / "ok", "train");
  CHECK(fs::exists(dir / "ok/loss.svg"));
}

TEST_CASE("ember plot: default --out for one run, required for several", "[plot]") {
  TempDir dir("plot");
  write_text(dir / "one/metrics.jsonl", metrics_lines(1, 12));
  write_text(dir / "two/metrics.jsonl", metrics_lines(1, 12));
  auto run = [](const std::string& args) {
    CLI::App app;
    CommandRunner runner = add_plot_command(app);
    app.parse("plot " + args, false);
    return runner();
  };
  CHECK(run(dir / "one") == 0);
  CHECK(fs::exists(dir / "one/loss.svg"));
  CHECK_THROWS_WITH(run(dir / "one " + dir / "two"), Catch::Contains("--out"));
  CHECK(run(dir / "one " + dir / "two --log-loss --out " + dir / "both.svg") == 0);
  CHECK(fs::exists(dir / "both.svg"));
}

TEST_CASE(
    "a run's OUT/loss.svg (as ember train writes it at the end), and a plot that cannot be written is a warning",
    "[plot][train]") {
  TempDir dir("plot");
  TrainOptions o;
  write_text(dir / "tiny.json", R"({"vocab_size": 64, "d_model": 16, "n_layers": 1, "n_heads": 2,
    "ffn_hidden": 32, "max_seq_len": 16})");
  o.config = dir / "tiny.json";
  std::vector<uint32_t> tokens(3000);
  for (size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<uint32_t>((i * 7 + i / 13) % 64);
  data::write_shard(dir / "train.bin", tokens, 64);
  o.data = dir / "train.bin";
  o.val_data = dir / "train.bin";
  o.out = dir / "run";
  o.batch_size = 2, o.seq_len = 8, o.steps = 6, o.warmup = 2, o.eval_every = 3, o.eval_batches = 1,
  o.log_every = 100;
  REQUIRE(run_train(o) == 0);
  write_run_plot_or_warn(dir / "run", "train");
  const std::string svg = read_text(dir / "run/loss.svg");
  CHECK(svg.find(">run: validation loss</text>") != std::string::npos);
  const auto lines = polylines(svg);
  REQUIRE(lines.size() == 6);
  CHECK(lines[0].size() == 6);
  CHECK(lines[1].size() == 2);

  // loss.svg is a folder: the rename fails, the run still succeeds.
  o.out = dir / "run2";
  fs::create_directories(dir / "run2/loss.svg/x");
  CHECK(run_train(o) == 0);
  write_run_plot_or_warn(dir / "run2", "train");  // noexcept: a warning on stderr
  CHECK(fs::is_directory(dir / "run2/loss.svg"));
  CHECK_THROWS_WITH(write_training_plot({dir / "run2"}, dir / "run2/loss.svg"),
                    Catch::Contains("cannot write '" + dir / "run2/loss.svg" + "'"));
  for (const auto& e : fs::directory_iterator(dir / "run2"))  // no temporary left
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
}

TEST_CASE("ember align's runs: a row of reward margin and accuracy, train and held-out", "[plot]") {
  TempDir dir("plot");
  // Steps 1..4 with validation at 0, 2 and 4; resumed from step 2 (steps 3 and 4 again).
  std::string text = "{\"step\":0,\"tokens\":0,\"val_loss\":0.69,\"val_rewards/margins\":0,"
                     "\"val_rewards/accuracy\":0}\n";
  for (const int step : {1, 2, 3, 4, 3, 4}) {
    text += "{\"step\":" + std::to_string(step) + ",\"tokens\":" + std::to_string(64 * step) +
            ",\"loss\":0.6,\"lr\":0.01,\"rewards/margins\":" + std::to_string(0.1 * step) +
            ",\"rewards/accuracy\":0.5";
    if (step % 2 == 0) text += ",\"val_loss\":0.6,\"val_rewards/margins\":0.05,\"val_rewards/accuracy\":0.75";
    text += "}\n";
  }
  write_text(dir / "a/metrics.jsonl", text);
  const RunMetrics run = read_run_metrics(dir / "a");
  REQUIRE(run.margin.size() == 4);
  CHECK(run.margin[3].value == Approx(0.4));
  CHECK(run.accuracy.size() == 4);
  REQUIRE(run.val_margin.size() == 3);
  CHECK(run.val_margin[0].step == 0);
  CHECK(run.val_accuracy.back().value == 0.75);
  const Figure f = training_figure({run}, {});
  REQUIRE(f.panels.size() == 6);
  CHECK(f.panels[4].title == "Reward margin against steps");
  CHECK(f.panels[5].title == "Reward accuracy against steps");
  REQUIRE(f.panels[4].series.size() == 2);
  CHECK(f.panels[4].series[0].points.size() == 4);
  CHECK(f.panels[4].series[1].dashed);
  CHECK(f.row_heights.size() == 3);
  // ember reward's keys fill the same row.
  write_text(dir / "r/metrics.jsonl",
             "{\"step\":0,\"tokens\":0,\"val_loss\":0.69,\"val_margin\":0,\"val_accuracy\":0.5}\n"
             "{\"step\":1,\"tokens\":64,\"loss\":0.6,\"lr\":0.01,\"margin\":0.2,\"accuracy\":0.75,"
             "\"val_loss\":0.6,\"val_margin\":0.1,\"val_accuracy\":1}\n");
  const RunMetrics reward = read_run_metrics(dir / "r");
  REQUIRE(reward.margin.size() == 1);
  CHECK(reward.margin[0].value == 0.2);
  CHECK(reward.accuracy[0].value == 0.75);
  REQUIRE(reward.val_accuracy.size() == 2);
  CHECK(reward.val_accuracy[1].value == 1);
  CHECK(reward.val_margin[1].value == 0.1);
  CHECK(training_figure({reward}, {}).panels.size() == 6);
  // Other runs keep their two rows.
  write_text(dir / "t/metrics.jsonl", metrics_lines(1, 5));
  CHECK(training_figure({read_run_metrics(dir / "t")}, {}).panels.size() == 4);
}
