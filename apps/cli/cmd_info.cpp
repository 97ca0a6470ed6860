// `ember info`: what a config costs: parameters (total and active per token),
// FLOPs per token, KV-cache bytes per token, training-step and inference memory,
// and whether this machine's memory holds them. Every count is exact (nn/sizing/model_stats.h);
// with --world-size/--zero one rank's memory, with --tp/--pp each stage's (info_stages.h).
#include <algorithm>
#include <cstdio>

#include "nn/checkpoint_file.h"
#include "apps/cli/commands.h"
#include "apps/cli/info_stages.h"
#include "nn/presets.h"
#include "core/system_memory.h"
#include "dist/reducer.h"
#include "nn/sizing/memory_plan.h"
#include "nn/sizing/model_stats.h"

namespace ember::apps {
namespace {

struct InfoOptions {
  std::string config, preset, checkpoint;
  int64_t batch = 8, seq_len = 0;
  // The per-rank plan, printed when one of its options is given.
  int64_t world_size = 1, zero = 0, checkpoint_every = 0, bucket_mb = 25;
  bool checkpoint_activations = false;
  StageOptions stages;  // --tp, --pp, ...: the per-stage table instead of the per-rank one
};

std::string human(double v) {
  char buf[32];
  if (v >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  } else if (v >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (v >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1fK", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

// "23.4 GiB of physical memory: enough to train and run this model", or what does not fit.
std::string machine_verdict(const nn::MemoryNeed& run, const nn::MemoryNeed& train) {
  const SystemMemory m = system_memory();
  if (m.bytes <= 0) return "memory unknown";
  std::string line = bytes_str(m.bytes) + " of " + m.what + ": ";
  if (train.total() <= m.bytes) return line + "enough to train and run this model";
  if (run.total() <= m.bytes) {
    return line + "enough to run this model, too little to train it " + train.purpose + " (needs " +
           bytes_str(train.total()) + ")";
  }
  return line + "too little to run this model (needs " + bytes_str(run.total()) + ") or train it (needs " +
         bytes_str(train.total()) + ")";
}

void add_plan_options(CLI::App* sub, InfoOptions& o) {
  sub->add_option("--world-size", o.world_size, "ranks of the run (mpirun -np N): prints the per-rank memory")
      ->capture_default_str();
  sub->add_option("--zero", o.zero, "ZeRO stage of the run, 0 to 3 (3: planned, unmeasured)")->capture_default_str();
  sub->add_flag("--checkpoint-activations", o.checkpoint_activations,
                "the run recomputes every block in backward (keeps only its input)");
  sub->add_option("--checkpoint-every", o.checkpoint_every,
                  "the run recomputes blocks 0, K, 2K, ... (K >= 1; implies --checkpoint-activations)");
  sub->add_option("--bucket-mb", o.bucket_mb, "the run's gradient bucket size in MiB")->capture_default_str();
}

bool plan_requested(const CLI::App* sub) {
  for (const char* flag : {"--world-size", "--zero", "--checkpoint-activations", "--checkpoint-every", "--bucket-mb"}) {
    if (sub->count(flag) > 0) return true;
  }
  return false;
}

nn::TrainingPlan training_plan(const CLI::App* sub, const InfoOptions& o, int64_t seq_len) {
  EMBER_CHECK(o.world_size >= 1 && o.world_size <= (int64_t{1} << 20), "--world-size must be between 1 and 1048576, "
              "got ", o.world_size);
  EMBER_CHECK(o.zero >= 0 && o.zero <= 3, "--zero must be 0, 1, 2 or 3, got ", o.zero);
  EMBER_CHECK(sub->count("--checkpoint-every") == 0 || o.checkpoint_every >= 1,
              "--checkpoint-every must be >= 1 (1: every block); got ", o.checkpoint_every);
  EMBER_CHECK(o.bucket_mb >= 1 && o.bucket_mb <= (int64_t{1} << 20), "--bucket-mb must be between 1 and 1048576, got ",
              o.bucket_mb);
  nn::TrainingPlan plan;
  plan.world_size = o.world_size;
  plan.zero = static_cast<int>(o.zero);
  plan.batch = o.batch;
  plan.seq_len = seq_len;
  plan.checkpoint_every = o.checkpoint_every > 0 ? o.checkpoint_every : (o.checkpoint_activations ? 1 : 0);
  plan.bucket_bytes = o.bucket_mb << 20;
  plan.first_bucket_bytes = std::min<int64_t>(plan.first_bucket_bytes, plan.bucket_bytes);
  plan.message_bytes = dist::ReducerOptions{}.message_bytes;
  return plan;
}

// The table of one rank: each part, then the total.
void print_rank_memory(const nn::ModelConfig& cfg, const nn::TrainingPlan& plan) {
  const nn::RankMemory m = nn::rank_memory(cfg, plan);
  std::string recompute = "no activation checkpointing";
  if (plan.checkpoint_every == 1) recompute = "every block recomputed";
  if (plan.checkpoint_every > 1) recompute = "blocks 0, " + std::to_string(plan.checkpoint_every) + ", ... recomputed";
  std::printf("per-rank peak memory  %lld rank(s), --zero %d, B = %lld, T = %lld per rank, float32, %s\n",
              static_cast<long long>(plan.world_size), plan.zero, static_cast<long long>(plan.batch),
              static_cast<long long>(plan.seq_len), recompute.c_str());
  const std::pair<const char*, int64_t> rows[] = {
      {"parameters", m.parameters},        {"gradients", m.gradients},
      {"optimizer state", m.optimizer},    {"activations", m.activations},
      {"communication", m.communication},  {"checkpoint save", m.checkpoint_save},
      {"runtime", m.runtime},              {"total", m.total()}};
  for (const auto& [name, bytes] : rows) {
    std::printf("  %-19s %10.1f MiB\n", name, static_cast<double>(bytes) / (1 << 20));
  }
}

}  // namespace

// Exactly one of --config, --preset, --checkpoint picks the model.
nn::ModelConfig resolve_model_config(const std::string& config, const std::string& preset,
                                     const std::string& checkpoint) {
  const int given = !config.empty() + !preset.empty() + !checkpoint.empty();
  EMBER_CHECK(given == 1, "give exactly one of --config, --preset, --checkpoint");
  if (!config.empty()) return nn::ModelConfig::from_file(config);
  if (!preset.empty()) return nn::preset_config(preset);
  return nn::read_checkpoint_config(checkpoint);
}

CommandRunner add_info_command(CLI::App& app) {
  auto opt = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand(
      "info",
      "Parameter counts, FLOPs per token, KV-cache size and training memory of a model.\n"
      "FLOPs per token (forward + backward) = 6 x active matmul parameters (every weight a token\n"
      "multiplies with, lm_head included, embedding lookups excluded) + 12 x n_layers x n_heads x\n"
      "head_dim x context (PaLM, appendix B; context = min(T, window) on sliding-window layers).\n"
      "--world-size, --zero, --checkpoint-activations/--checkpoint-every or --bucket-mb add the peak\n"
      "memory of one rank of that `ember train` run, part by part (docs/scaling.md, Per-rank memory).\n"
      "--tp, --pp, --micro-batches, --pp-layers or --pp-schedule plan a tensor- and pipeline-parallel\n"
      "layout instead: its memory per rank of each stage and the pipeline bubble (docs/scaling.md,\n"
      "Choosing T, P and D).");
  sub->add_option("--config", opt->config, "model config JSON file")->check(CLI::ExistingFile);
  sub->add_option("--preset", opt->preset, "shipped preset (dense-small, moe-small, gpt2-small, llama-1b)");
  sub->add_option("--checkpoint", opt->checkpoint, "checkpoint whose config to describe")->check(CLI::ExistingFile);
  sub->add_option("--batch-size", opt->batch, "batch size for the memory estimate")->capture_default_str();
  sub->add_option("--seq-len", opt->seq_len, "sequence length (0: the model's max_seq_len)");
  add_plan_options(sub, *opt);
  add_stage_options(sub, opt->stages);
  return [opt, sub]() {
    const nn::ModelConfig cfg = resolve_model_config(opt->config, opt->preset, opt->checkpoint);
    EMBER_CHECK(opt->batch > 0, "--batch-size must be positive, got ", opt->batch);
    EMBER_CHECK(opt->seq_len >= 0 && opt->seq_len <= cfg.max_seq_len, "--seq-len must be between 1 and the model's "
                "max_seq_len ", cfg.max_seq_len, " (or 0: max_seq_len), got ", opt->seq_len);
    const int64_t T = opt->seq_len > 0 ? opt->seq_len : cfg.max_seq_len;
    const bool want_stages = stage_plan_requested(sub);
    const bool want_plan = plan_requested(sub) || want_stages;
    const nn::TrainingPlan plan = want_plan ? training_plan(sub, *opt, T) : nn::TrainingPlan{};
    const std::string stages = want_stages ? stage_report(cfg, plan, sub, opt->stages) : "";
    const nn::ModelStats s = nn::model_stats(cfg, opt->batch, T);
    std::printf("parameters            %s (%lld)\n", human(static_cast<double>(s.total_params)).c_str(),
                static_cast<long long>(s.total_params));
    std::printf("active per token      %s (%lld)\n", human(static_cast<double>(s.active_params)).c_str(),
                static_cast<long long>(s.active_params));
    std::printf("embedding parameters  %s\n", human(static_cast<double>(s.embedding_params)).c_str());
    std::printf("FLOPs per token       %s (forward + backward at T = %lld)\n",
                human(s.flops_per_token).c_str(), static_cast<long long>(T));
    std::printf("KV cache per token    %lld bytes (float32)\n",
                static_cast<long long>(s.kv_cache_bytes_per_token));
    std::printf("training memory       %s bytes at B = %lld, T = %lld (weights, grads, AdamW, activations)\n",
                human(static_cast<double>(s.train_memory_bytes)).c_str(),
                static_cast<long long>(opt->batch), static_cast<long long>(T));
    const nn::MemoryNeed run = nn::inference_memory(cfg);
    const nn::MemoryNeed train = nn::training_memory(cfg, opt->batch, T);
    std::printf("inference memory      %s bytes (float32 weights and position tables)\n",
                human(static_cast<double>(run.total())).c_str());
    std::printf("this machine          %s\n", machine_verdict(run, train).c_str());
    if (want_stages) {
      std::fputs(stages.c_str(), stdout);
    } else if (want_plan) {
      print_rank_memory(cfg, plan);
    }
    return 0;
  };
}

}  // namespace ember::apps
