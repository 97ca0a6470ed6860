// Training curves from metrics.jsonl as an SVG figure (see training_plot.h).
#include "apps/plot/training_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/io/read_file.h"
#include "core/io/atomic_file.h"

namespace ember::apps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Tableau 10: distinct colours that stay apart in print and for most colour-blind readers.
constexpr size_t kSmoothAbove = 200;  // train records beyond which the loss is smoothed

const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

double number_field(const json& record, const char* key, const std::string& where) {
  const json& v = record.at(key);
  EMBER_CHECK(v.is_number(), where, ": \"", key, "\" is not a number");
  return v.get<double>();
}

// Drops the points at or after `step` (a resumed run is about to repeat them).
void truncate_from(std::vector<RunMetrics::Point>& points, double step) {
  while (!points.empty() && points.back().step >= step) points.pop_back();
}

Series series_of(const std::vector<RunMetrics::Point>& points, bool by_tokens, const char* color,
                 bool validation) {
  Series s;
  s.color = color;
  s.dashed = validation;
  s.markers = validation && points.size() <= 60;  // beyond that, markers would hide the line
  for (const RunMetrics::Point& p : points)
    s.points.emplace_back(by_tokens ? p.tokens : p.step, p.value);
  return s;
}

// The exponential moving average of the values, debiased as TensorBoard's
// smoothing: s_k = w s_(k-1) + (1 - w) v_k from s_0 = 0, shown as s_k / (1 - w^k),
// with w = 1 - 1 / span (span: about how many records it averages).
std::vector<RunMetrics::Point> smoothed(const std::vector<RunMetrics::Point>& points, double span) {
  const double w = 1 - 1 / span;
  double ema = 0, weight = 1;
  std::vector<RunMetrics::Point> out = points;
  for (RunMetrics::Point& p : out) {
    ema = w * ema + (1 - w) * p.value;
    weight *= w;
    p.value = ema / (1 - weight);
  }
  return out;
}

// The reward metrics of a record (ember align's rewards/margins and rewards/accuracy, ember
// reward's margin and accuracy): train ones beside "loss", held-out ones beside "val_loss"
// (each dropped from `step` on first when a resumed run repeats it).
void read_rewards(const json& record, double step, double tokens, const std::string& where,
                  RunMetrics& run) {
  const std::pair<const char*, std::vector<RunMetrics::Point>*> keys[] = {
      {"rewards/margins", &run.margin},
      {"rewards/accuracy", &run.accuracy},
      {"val_rewards/margins", &run.val_margin},
      {"val_rewards/accuracy", &run.val_accuracy},
      {"margin", &run.margin},
      {"accuracy", &run.accuracy},
      {"val_margin", &run.val_margin},
      {"val_accuracy", &run.val_accuracy},
      {"reward", &run.reward},
      {"kl", &run.kl},
      {"val_reward", &run.val_reward}};
  for (const auto& [key, points] : keys) {
    if (!record.contains(key)) continue;
    truncate_from(*points, step);
    points->push_back({step, tokens, number_field(record, key, where)});
  }
}

// The row of an alignment or reward run: reward margin and reward accuracy against steps.
void add_reward_row(const std::vector<RunMetrics>& runs, Figure& f) {
  Panel margin{"Reward margin against steps", "step", "reward margin", false, true, {}};
  Panel accuracy{"Reward accuracy against steps", "step", "reward accuracy", false, true, {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& r = runs[i];
    const char* color = kColors[i % std::size(kColors)];
    margin.series.push_back(series_of(r.margin, false, color, false));
    margin.series.push_back(series_of(r.val_margin, false, color, true));
    accuracy.series.push_back(series_of(r.accuracy, false, color, false));
    accuracy.series.push_back(series_of(r.val_accuracy, false, color, true));
  }
  f.panels.push_back(margin);
  f.panels.push_back(accuracy);
  f.row_heights.push_back(230);
}

// The row of an RL run: the mean reward (the held-out greedy completions' dashed) and the KL.
void add_rl_row(const std::vector<RunMetrics>& runs, Figure& f) {
  Panel reward{"Mean reward against steps", "step", "reward", false, true, {}};
  Panel kl{"KL to the reference against steps", "step", "kl (logp_old - ref)", false, true, {}};
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& r = runs[i];
    const char* color = kColors[i % std::size(kColors)];
    reward.series.push_back(series_of(r.reward, false, color, false));
    reward.series.push_back(series_of(r.val_reward, false, color, true));
    kl.series.push_back(series_of(r.kl, false, color, false));
  }
  f.panels.push_back(reward);
  f.panels.push_back(kl);
  f.row_heights.push_back(230);
}

// The folder's own name ("runs/quick/" -> "quick").
std::string folder_name(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();
  const std::string name = p.filename().string();
  return name.empty() || name == "." ? fs::absolute(dir).lexically_normal().filename().string()
                                     : name;
}

}  // namespace

RunMetrics read_run_metrics(const std::string& run_dir) {
  const fs::path path = fs::path(run_dir) / "metrics.jsonl";
  const std::string file = path.string();
  EMBER_CHECK(fs::is_directory(run_dir), run_dir, ": no such run folder");
  EMBER_CHECK(fs::exists(path), file, ": no such file (is ", run_dir,
              " the --out folder of an `ember train` run?)");
  const std::string text = read_file(file, "run's metrics file");

  RunMetrics run;
  run.name = folder_name(run_dir);
  size_t begin = 0;
  for (int64_t line = 1; begin < text.size(); ++line) {
    size_t end = text.find('\n', begin);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    const std::string content = text.substr(begin, end - begin);
    begin = end + 1;
    if (content.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file + " line " + std::to_string(line);
    json record = json::parse(content, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() && !complete) break;  // a run killed mid-write
    EMBER_CHECK(record.is_object(), where, ": not a JSON object");
    if (!record.contains("step")) continue;  // not a per-step record
    const double step = number_field(record, "step", where);
    double tokens = record.contains("tokens") ? number_field(record, "tokens", where) : NAN;
    if (record.contains("loss")) {
      if (!run.train_loss.empty() && step <= run.train_loss.back().step) {
        truncate_from(run.train_loss, step);
        truncate_from(run.lr, step);
        truncate_from(run.val_loss, step);
        for (auto* rewards : {&run.margin, &run.accuracy, &run.val_margin, &run.val_accuracy,
                              &run.reward, &run.kl, &run.val_reward})
          truncate_from(*rewards, step);
      }
      run.train_loss.push_back({step, tokens, number_field(record, "loss", where)});
      if (record.contains("lr"))
        run.lr.push_back({step, tokens, number_field(record, "lr", where)});
    }
    if (record.contains("val_loss")) {
      truncate_from(run.val_loss, step);
      // A validation line without tokens takes its step's train record's.
      if (std::isnan(tokens) && !run.train_loss.empty() && run.train_loss.back().step == step) {
        tokens = run.train_loss.back().tokens;
      }
      run.val_loss.push_back({step, tokens, number_field(record, "val_loss", where)});
    }
    read_rewards(record, step, tokens, where, run);
  }
  EMBER_CHECK(
      !run.train_loss.empty() || !run.val_loss.empty(), file,
      text.empty() ? ": empty (the run has not finished a step yet)" : ": holds no loss record");
  return run;
}

Figure training_figure(const std::vector<RunMetrics>& runs, const TrainingPlotOptions& options) {
  Figure f;
  std::string names;
  for (const RunMetrics& r : runs) names += (names.empty() ? "" : ", ") + r.name;
  f.title =
      "Training curves: " + (names.size() <= 90 ? names : std::to_string(runs.size()) + " runs");
  f.columns = 2;
  f.row_heights = {380, 230};
  const char* loss_title = options.log_loss ? "loss (nats/token, log scale)" : "loss (nats/token)";
  Panel loss_steps{"Loss against steps", "step", loss_title, options.log_loss, false, {}};
  Panel loss_tokens{"Loss against tokens", "tokens", loss_title, options.log_loss, false, {}};
  Panel lr_steps{"Learning rate against steps", "step", "learning rate", false, true, {}};
  Panel lr_tokens{"Learning rate against tokens", "tokens", "learning rate", false, true, {}};
  // Long runs' noisy train loss: the raw values faint, a moving average over them.
  bool any_smoothed = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunMetrics& r = runs[i];
    const char* color = kColors[i % std::size(kColors)];
    const bool smooth = r.train_loss.size() > kSmoothAbove;
    any_smoothed |= smooth;
    const double span = static_cast<double>(r.train_loss.size()) / 50;  // 2% of the steps
    for (const bool by_tokens : {false, true}) {
      Panel& loss = by_tokens ? loss_tokens : loss_steps;
      loss.series.push_back(series_of(r.train_loss, by_tokens, color, false));
      if (smooth) {
        loss.series.back().opacity = 0.3;
        loss.series.push_back(series_of(smoothed(r.train_loss, span), by_tokens, color, false));
      }
      loss.series.push_back(series_of(r.val_loss, by_tokens, color, true));
      (by_tokens ? lr_tokens : lr_steps).series.push_back(series_of(r.lr, by_tokens, color, false));
    }
    f.legend.push_back({r.name + ": train loss, learning rate", color, false, false});
    f.legend.push_back({r.name + ": validation loss", color, true, true});
  }
  if (any_smoothed) {
    f.subtitle = "Runs of more than " + std::to_string(kSmoothAbove) +
                 " steps: train loss as a moving average over 2% of the steps (debiased EMA), raw "
                 "values faint";
  }
  f.panels = {loss_steps, loss_tokens, lr_steps, lr_tokens};
  if (std::any_of(runs.begin(), runs.end(), [](const RunMetrics& r) { return !r.margin.empty(); }))
    add_reward_row(runs, f);
  const auto rl = [](const RunMetrics& r) { return !r.reward.empty() || !r.val_reward.empty(); };
  if (std::any_of(runs.begin(), runs.end(), rl)) add_rl_row(runs, f);
  return f;
}

void write_training_plot(const std::vector<std::string>& run_dirs, const std::string& out_path,
                         const TrainingPlotOptions& options) {
  EMBER_CHECK(!run_dirs.empty(), "no run folder given");
  std::vector<RunMetrics> runs;
  std::map<std::string, int> name_count;
  for (const std::string& dir : run_dirs) {
    runs.push_back(read_run_metrics(dir));
    ++name_count[runs.back().name];
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    if (name_count[runs[i].name] > 1) runs[i].name = run_dirs[i];
  }
  const std::string svg = render_svg(training_figure(runs, options));
  write_file_atomically(out_path, svg);  // fsync'd; a full disk leaves no partial file
}

void write_run_plot_or_warn(const std::string& run_dir, const char* command) noexcept {
  try {
    write_training_plot({run_dir}, (fs::path(run_dir) / "loss.svg").string());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ember %s: warning: no loss.svg written: %s\n", command, e.what());
  }
}

}  // namespace ember::apps
