// `ember info --tp T --pp P ...`: the layout's options and its per-stage table, one column per
// stage, the rows of the per-rank table (docs/cli.md, "Tensor and pipeline layouts"): the plan
// of a layout `ember train --tp T --pp P` runs.
#include "apps/cli/info_stages.h"

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

#include "core/error.h"
#include "nn/parallel_plan.h"
#include "nn/sizing/stage_memory.h"

namespace ember::apps {
namespace {

std::string format(const char* fmt, auto... args) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

std::string mib(int64_t bytes) { return format("%.1f", static_cast<double>(bytes) / (1 << 20)); }

// "  name" then one right-aligned cell per stage, at least 10 wide.
std::string row(const char* name, const std::vector<std::string>& cells, int width) {
  std::string line = format("  %-19s", name);
  for (const std::string& c : cells) line += format(" %*s", width, c.c_str());
  return line + "\n";
}

std::string header(const nn::StagePlan& plan, const std::string& schedule) {
  const nn::TrainingPlan& r = plan.run;
  const int64_t m = plan.micro_batch_count(), p = plan.layout.pp();
  std::string recompute = "no activation checkpointing";
  if (r.checkpoint_every == 1) recompute = "every block recomputed";
  if (r.checkpoint_every > 1) recompute = "blocks 0, " + std::to_string(r.checkpoint_every) + ", ... recomputed";
  return format("parallel layout       %lld rank(s) = --tp %lld x --pp %lld x %lld data-parallel, --zero %d\n",
                static_cast<long long>(r.world_size), static_cast<long long>(plan.layout.tp),
                static_cast<long long>(p), static_cast<long long>(plan.data_parallel()), r.zero) +
         format("pipeline              B = %lld per rank in %lld micro-batch(es) of %lld row(s), %s; bubble "
                "(P - 1) / (M + P - 1) = %lld / %lld = %.1f%%\n",
                static_cast<long long>(r.batch), static_cast<long long>(m), static_cast<long long>(r.batch / m),
                schedule.c_str(), static_cast<long long>(p - 1), static_cast<long long>(m + p - 1),
                100 * nn::bubble_fraction(p, m)) +
         format("per-rank peak memory by stage (MiB; sequence length %lld, float32, %s)\n",
                static_cast<long long>(r.seq_len), recompute.c_str());
}

std::string table(const std::vector<nn::StageMemory>& stages) {
  std::vector<std::string> names, blocks, held, elements;
  for (size_t s = 0; s < stages.size(); ++s) {
    const nn::StageMemory& st = stages[s];
    names.push_back("stage " + std::to_string(s));
    const int64_t last = st.first_layer + st.layers - 1;
    blocks.push_back(std::to_string(st.first_layer) + (last > st.first_layer ? "-" + std::to_string(last) : ""));
    held.push_back(std::to_string(st.in_flight));
    elements.push_back(std::to_string(st.rank_params));
  }
  int width = 10;
  for (const std::string& e : elements) width = std::max(width, static_cast<int>(e.size()));
  std::string out = row("", names, width) + row("blocks", blocks, width) + row("micro-batches held", held, width) +
                    row("parameter elements", elements, width);
  const std::pair<const char*, int64_t nn::RankMemory::*> parts[] = {
      {"parameters", &nn::RankMemory::parameters},     {"gradients", &nn::RankMemory::gradients},
      {"optimizer state", &nn::RankMemory::optimizer}, {"activations", &nn::RankMemory::activations},
      {"communication", &nn::RankMemory::communication}, {"checkpoint save", &nn::RankMemory::checkpoint_save},
      {"runtime", &nn::RankMemory::runtime}};
  for (const auto& [name, member] : parts) {
    std::vector<std::string> cells;
    for (const nn::StageMemory& st : stages) cells.push_back(mib(st.memory.*member));
    out += row(name, cells, width);
  }
  std::vector<std::string> totals;
  for (const nn::StageMemory& st : stages) totals.push_back(mib(st.memory.total()));
  return out + row("total", totals, width);
}

}  // namespace

void add_stage_options(CLI::App* sub, StageOptions& o) {
  sub->add_option("--tp", o.tp, "tensor-parallel ranks T of the layout to plan (heads, FFN width split)")
      ->capture_default_str();
  sub->add_option("--pp", o.pp, "pipeline stages P of the layout to plan (contiguous blocks)")->capture_default_str();
  sub->add_option("--micro-batches", o.micro_batches, "micro-batches M per rank's batch (default P)");
  sub->add_option("--pp-layers", o.pp_layers, "blocks per stage, a,b,... (P counts summing to n_layers)");
  sub->add_option("--pp-schedule", o.schedule, "pipeline schedule: 1f1b or gpipe")
      ->capture_default_str()
      ->check(CLI::IsMember({"1f1b", "gpipe"}));
}

bool stage_plan_requested(const CLI::App* sub) {
  for (const char* flag : {"--tp", "--pp", "--micro-batches", "--pp-layers", "--pp-schedule"}) {
    if (sub->count(flag) > 0) return true;
  }
  return false;
}

std::string stage_report(const nn::ModelConfig& cfg, nn::TrainingPlan run, const CLI::App* sub,
                         const StageOptions& o) {
  const std::vector<int64_t> counts = o.pp_layers.empty() ? std::vector<int64_t>{} : nn::parse_layer_counts(o.pp_layers);
  nn::StagePlan plan;
  plan.layout = nn::make_parallel_layout(cfg, o.tp, o.pp, counts);
  if (sub->count("--world-size") == 0) run.world_size = o.tp * o.pp;
  plan.run = run;
  EMBER_CHECK(sub->count("--micro-batches") == 0 || o.micro_batches >= 1, "--micro-batches must be >= 1, got ",
              o.micro_batches);
  plan.micro_batches = o.micro_batches;
  plan.gpipe = o.schedule == "gpipe";
  const std::vector<nn::StageMemory> stages = nn::stage_memory(cfg, plan);
  return header(plan, o.schedule) + table(stages);
}

}  // namespace ember::apps
