// The training-curves figure of `ember plot` and `ember train`: each run's
// OUT/metrics.jsonl read into series, then train and validation loss (top)
// and the learning rate (below) against steps (left) and tokens (right),
// one colour per run; runs of `ember align` and `ember reward` add a row: the reward margin
// and the reward accuracy against steps (train and held-out); runs of `ember rl` a row of the
// mean reward (train, and the held-out greedy completions') and the KL against steps. Written as a standalone SVG
// (apps/plot/svg_plot.h).
#pragma once
#include <string>
#include <vector>

#include "apps/plot/svg_plot.h"

namespace ember::apps {

// One run's curves. Records are the JSON lines `ember train` appends: every
// line has "step" and "tokens"; a train record has "loss" and "lr", a
// validation record "val_loss" (both may share a line). When a resumed run
// repeats steps (it restarted from an earlier checkpoint), the later records
// replace the earlier ones from that step on.
struct RunMetrics {
  std::string name;  // the legend's name for the run
  struct Point {
    double step, tokens, value;
  };
  std::vector<Point> train_loss, lr, val_loss;
  // ember align's records: "rewards/margins", "rewards/accuracy" and their "val_" values;
  // ember reward's: "margin", "accuracy" and theirs.
  std::vector<Point> margin, accuracy, val_margin, val_accuracy;
  // ember rl's records: "reward" (the step's mean), "kl", and the held-out "val_reward".
  std::vector<Point> reward, kl, val_reward;
};

// Reads RUN_DIR/metrics.jsonl. ember::Error (naming the file) when it is
// missing, unreadable, holds a malformed line, or has no loss record; an
// incomplete last line (a run killed mid-write) is ignored.
RunMetrics read_run_metrics(const std::string& run_dir);

struct TrainingPlotOptions {
  bool log_loss = false;
};

Figure training_figure(const std::vector<RunMetrics>& runs, const TrainingPlotOptions& options);
// Reads the runs and writes the figure to out_path (atomically: a temporary
// file renamed over it). Legend names are the run folders' names, or the
// paths as given when two folders share a name.
void write_training_plot(const std::vector<std::string>& run_dirs, const std::string& out_path,
                         const TrainingPlotOptions& options = {});
// The end-of-run plot of `ember train` / `ember finetune` (command names it in
// the warning): RUN_DIR/loss.svg; never throws, a failure is one warning line on
// stderr (the run itself has succeeded).
void write_run_plot_or_warn(const std::string& run_dir, const char* command) noexcept;

}  // namespace ember::apps
