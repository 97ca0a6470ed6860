// `ember plot RUN_DIR... [--out FILE] [--log-loss]`: the training curves of
// one or more runs (their metrics.jsonl) as one standalone SVG.
#include <cstdio>
#include <filesystem>

#include "apps/cli/commands.h"
#include "apps/cli/output_file.h"
#include "apps/plot/training_plot.h"
#include "core/error.h"

namespace ember::apps {
namespace {

struct PlotOptions {
  std::vector<std::string> runs;
  std::string out;
  bool log_loss = false;
};

}  // namespace

CommandRunner add_plot_command(CLI::App& app) {
  auto o = std::make_shared<PlotOptions>();
  CLI::App* sub = app.add_subcommand(
      "plot",
      "Train and validation loss and the learning rate of runs, against steps and tokens, as an "
      "SVG\n"
      "(from each RUN_DIR/metrics.jsonl; one colour per run; opens in any browser)");
  sub->add_option("runs", o->runs, "run folders (the --out of `ember train`)")->required();
  sub->add_option(
      "--out", o->out,
      "SVG file to write (default with one run: RUN_DIR/loss.svg; required with several)");
  sub->add_flag("--log-loss", o->log_loss, "logarithmic loss axis");
  return [o]() {
    EMBER_CHECK(!o->out.empty() || o->runs.size() == 1,
                "--out: give the SVG file to write when plotting several runs");
    const std::string out =
        o->out.empty() ? (std::filesystem::path(o->runs[0]) / "loss.svg").string() : o->out;
    require_replaceable("--out", out, "an SVG", {"<?xml", "<svg"});
    write_training_plot(o->runs, out, TrainingPlotOptions{o->log_loss});
    std::printf("wrote %s\n", out.c_str());
    return 0;
  };
}

}  // namespace ember::apps
