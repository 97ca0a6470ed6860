// What a run prints around its loop: the lines before the first step (ranks,
// parameters, tokens per step, precision, activation checkpointing, data), the
// --profile report, and the end of a run: the `done:` line, the MFU, and the
// sample of --sample-tokens drawn by inference::generate; a fine-tuning run also its peak RSS.
#include <omp.h>
#include <sys/resource.h>

#include <cstdio>
#include <filesystem>

#include "apps/train/closed_stdout.h"
#include "apps/train/pipeline_run.h"
#include "apps/train/profile_report.h"
#include "apps/train/run_files.h"
#include "apps/train/rl_run.h"
#include "apps/train/run.h"
#include "core/kernels/matmul.h"
#include "core/profiler.h"
#include "core/io/atomic_file.h"
#include "inference/generate.h"

namespace ember::apps {

namespace fs = std::filesystem;

namespace {

// ember align's data line: the pairs kept, held out, dropped and cut to T+1 ids.
void print_pairs_line(const TrainRun& run) {
  std::printf("data: %lld pairs, ", static_cast<long long>(run.pairs->size() + run.held_out));
  if (run.held_out == 0) std::printf("no validation");
  if (run.held_out > 0)
    std::printf("%lld held out for validation", static_cast<long long>(run.held_out));
  if (run.dropped_pairs > 0) {
    std::printf("; %lld dropped (a side without a completion token in its first %lld)",
                static_cast<long long>(run.dropped_pairs), static_cast<long long>(run.o.seq_len + 1));
  }
  if (run.cut_pairs > 0) {
    std::printf("; %lld cut to --seq-len + 1 = %lld tokens", static_cast<long long>(run.cut_pairs),
                static_cast<long long>(run.o.seq_len + 1));
  }
  std::printf("\n");
}

// The data line: token count and validation windows, or conversations, the held-out ones and
// those cut to T+1 ids (reported once, here).
void print_data_line(const TrainRun& run) {
  if (run.rl) {
    std::printf("data: %lld prompts, ", static_cast<long long>(run.rl->train.size() + run.rl->held_out.size()));
    if (run.held_out == 0) std::printf("no validation\n");
    if (run.held_out > 0)
      std::printf("%lld held out for validation (greedy completions)\n", static_cast<long long>(run.held_out));
    return;
  }
  if (run.pairs) {
    print_pairs_line(run);
    return;
  }
  if (!run.chat_rows) {
    std::printf(
        "data: %llu train tokens%s\n", static_cast<unsigned long long>(run.train_set->size()),
        run.val_loader
            ? (", validation " + std::to_string(run.val_loader->num_windows()) + " windows").c_str()
            : ", no validation");
    return;
  }
  const int64_t truncated =
      run.chat_rows->truncated + (run.chat_val_rows ? run.chat_val_rows->truncated : 0);
  std::printf("data: %lld conversations, ",
              static_cast<long long>(run.chat_rows->rows.size() + run.held_out));
  if (run.held_out == 0) std::printf("no validation");
  if (run.held_out > 0) {
    std::printf("%lld held out for validation", static_cast<long long>(run.held_out));
  }
  if (run.held_out > 0 && !run.chat_val_rows)
    std::printf(" (no trained token in their first %lld: no validation)",
                static_cast<long long>(run.o.seq_len + 1));
  if (truncated > 0) {
    std::printf("; %lld cut to --seq-len + 1 = %lld tokens", static_cast<long long>(truncated),
                static_cast<long long>(run.o.seq_len + 1));
  }
  std::printf("\n");
}

// What a fine-tuning run trains: every parameter, or the adapters (and added rows) over a base
// kept as --quantize says.
void print_finetune_line(const TrainRun& run) {
  std::printf("fine-tuning %s: %lld trained parameters", run.finetune_base.c_str(),
              static_cast<long long>(run.trained_params));
  if (run.cfg.lora) {
    std::printf(" (LoRA r %lld alpha %g on %s, base %s)", static_cast<long long>(run.cfg.lora->r),
                run.cfg.lora->alpha, run.o.lora_targets.c_str(),
                run.cfg.quantize == "none" ? "float32" : run.cfg.quantize.c_str());
  } else {
    std::printf(" (all of them)");
  }
  if (run.added_rows > 0) {
    std::printf("; --add-chat-tokens: %lld new vocabulary rows",
                static_cast<long long>(run.added_rows));
  }
  if (run.o.reward) std::printf("; a reward model: its score head score.weight always trains");
  if (run.o.rl && run.model->has_value_head())
    std::printf("; ppo: its value head value.weight always trains");
  std::printf("\n");
}

// ember rl's first line: the algorithm, prompts and completions per step, the reward.
void print_rl_header(const TrainRun& run) {
  const TrainOptions& o = run.o;
  std::printf("ember rl: %s parameters, %s, %s%lld prompts x %lld completions of at most %lld tokens "
              "per step (reward: %s), %lld update%s each, %lld steps, out %s\n",
              std::to_string(run.stats.total_params).c_str(), o.algo.c_str(),
              run.data_world > 1 ? ("W " + std::to_string(run.data_world) + " x ").c_str() : "",
              static_cast<long long>(o.batch_size), static_cast<long long>(o.group_size),
              static_cast<long long>(o.max_tokens),
              o.reward_model.empty() ? o.reward_rule.c_str() : o.reward_model.c_str(),
              static_cast<long long>(o.iterations), o.iterations == 1 ? "" : "s",
              static_cast<long long>(o.steps), o.out.c_str());
}

}  // namespace

void print_run_start(const TrainRun& run) {
  const TrainOptions& o = run.o;
  if (!run.root) return;
  const char* command = command_name(o);
  if (run.world > 1) {
    std::string tp;  // the layout: "--tp 2 x --pp 2 (1f1b, 4 micro-batches) x 1 data-parallel, "
    if (o.tp > 1) tp += "--tp " + std::to_string(o.tp) + " x ";
    if (o.pp > 1)
      tp += "--pp " + std::to_string(o.pp) + " (" + o.pp_schedule + ", " + std::to_string(o.micro_batches) +
            " micro-batches) x ";
    if (!tp.empty()) tp += std::to_string(run.data_world) + " data-parallel, ";
    std::printf("ember %s: %lld ranks x %d threads, %s%s\n", command,
                static_cast<long long>(run.world), omp_get_max_threads(), tp.c_str(),
                o.zero == 3 ? "ZeRO-3" : o.zero == 2 ? "ZeRO-2" : o.zero ? "ZeRO-1" : "all-reduce");
  }
  if (o.rl) {
    print_rl_header(run);
  } else {
    std::printf(
        "ember %s: %s parameters, %lld tokens/step (%sB %lld x T %lld x accum %lld), %lld steps, "
        "out %s\n",
        command, std::to_string(run.stats.total_params).c_str(),
        static_cast<long long>(run.tokens_per_step),
        run.data_world > 1 ? ("W " + std::to_string(run.data_world) + " x ").c_str() : "",
        static_cast<long long>(o.batch_size), static_cast<long long>(o.seq_len),
        static_cast<long long>(o.grad_accum), static_cast<long long>(o.steps), o.out.c_str());
  }
  if (o.finetune) print_finetune_line(run);
  if (run.autocast == DType::BFloat16) {
    std::printf("mixed precision: bf16 matmuls, float32 weights, gradients and AdamW%s\n",
                kernels::bf16_matmul_native()
                    ? ""
                    : " (warning: this CPU has no bf16 instructions; slower than float32)");
  }
  if (const int64_t every = run.model->activation_checkpointing(); every > 0) {
    const int64_t n = run.cfg.n_layers, checkpointed = (n + every - 1) / every;
    std::printf("activation checkpointing: %lld of %lld blocks keep only their input and are "
                "recomputed in backward\n",
                static_cast<long long>(checkpointed), static_cast<long long>(n));
  }
  print_data_line(run);
  continue_if_stdout_closed();
}

namespace {

// --pp: each stage's forward, backward and wait ms per profiled step and its idle share (1 -
// its busy time / the longest stage's forward + backward + wait), and the pipeline's
// (apps/train/pipeline_run.h), as profile.json's "pipeline" object.
nlohmann::json stage_profile(const RunTally& tally, int64_t steps) {
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  const std::vector<double>&f = tally.stage_forward_ms, &b = tally.stage_backward_ms, &w = tally.stage_wait_ms;
  double span = 0;
  for (size_t i = 0; i < w.size(); ++i) span = std::max(span, f[i] + b[i] + w[i]);
  nlohmann::json j;
  for (size_t i = 0; i < w.size(); ++i) {
    j["forward_ms_per_step"].push_back(f[i] / n);
    j["backward_ms_per_step"].push_back(b[i] / n);
    j["wait_ms_per_step"].push_back(w[i] / n);
    j["idle"].push_back(span > 0 ? 1 - (f[i] + b[i]) / span : 0.0);
  }
  j["pipeline_idle"] = idle_share(f, b, w);
  return j;
}

// The same as a table: one column per stage.
std::string stage_table(const nlohmann::json& j) {
  std::string out = "pipeline stages (ms per step)";
  for (size_t i = 0; i < j["idle"].size(); ++i) out += "  stage " + std::to_string(i);
  out += "\n";
  for (const char* key : {"forward_ms_per_step", "backward_ms_per_step", "wait_ms_per_step", "idle"}) {
    char name[40];
    std::snprintf(name, sizeof name, "  %-27s", std::string(key).substr(0, std::string(key).find("_ms")).c_str());
    out += name;
    for (const auto& v : j[key]) {
      char cell[32];
      std::snprintf(cell, sizeof cell, key == std::string("idle") ? "  %6.1f%%" : "  %7.1f",
                    key == std::string("idle") ? 100 * v.get<double>() : v.get<double>());
      out += cell;
    }
    out += "\n";
  }
  char idle[64];
  std::snprintf(idle, sizeof idle, "  pipeline idle %.1f%%\n", 100 * j["pipeline_idle"].get<double>());
  return out + idle;
}

}  // namespace

void report_profile(const TrainRun& run, const RunTally& tally) {
  if (!run.o.profile || !run.root) return;
  const prof::Snapshot snap = prof::snapshot();
  const double wall_ms =
      snap.steps > 0 ? tally.profiled_seconds * 1e3 / static_cast<double>(snap.steps) : 0;
  const std::string path = (fs::path(run.o.out) / "profile.json").string();
  nlohmann::json j = profile_json(snap, tally.profile_warmup, wall_ms);
  std::printf("%s", profile_table(snap, tally.profile_warmup, wall_ms).c_str());
  if (!tally.stage_wait_ms.empty()) {
    j["pipeline"] = stage_profile(tally, snap.steps);
    std::printf("%s", stage_table(j["pipeline"]).c_str());
  }
  write_file_atomically(path, j.dump(2) + "\n");
  std::printf("profile written to %s\n", path.c_str());
  std::fflush(stdout);
}

namespace {

// "215.3 GFLOP/s", or with ranks "430.6 GFLOP/s = 2 ranks x 215.3".
std::string peak_text(double flops, int64_t world) {
  char buf[96];
  if (world > 1) {
    std::snprintf(buf, sizeof buf, "%.1f GFLOP/s = %lld ranks x %.1f", flops / 1e9,
                  static_cast<long long>(world), flops / static_cast<double>(world) / 1e9);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f GFLOP/s", flops / 1e9);
  }
  return buf;
}

// The run's MFU: the steps' model FLOPs over their time (evaluation and checkpoints left out),
// over the peak the progress lines ended with: the matmul peak (cached or measured at start),
// or the fastest step's rate when a step beat it (then the peak was measured low).
void print_mean_mfu(const TrainRun& run, const RunTally& tally) {
  const char* dtype = run.autocast == DType::BFloat16 ? "bf16" : "float32";
  const double mfu = 100 * tally.flops / tally.step_seconds / tally.peak;
  const std::string when = tally.peak_cached
                               ? "cached in " + tally.peak_cache + " on " + tally.rank_peak.measured
                               : std::string("measured at start");
  const std::string remeasure = std::string("`ember bench --peak") +
                                (run.autocast == DType::BFloat16 ? " --dtype bf16" : "") +
                                " --threads " + std::to_string(omp_get_max_threads()) + "`";
  if (tally.peak_raised) {
    std::printf("mean MFU %.1f%% of the fastest step's %s, above the %s matmul peak %s (%s): "
                "that peak was measured low; %s on an idle machine re-measures it\n",
                mfu, peak_text(tally.peak, run.world).c_str(), dtype,
                peak_text(tally.rank_peak.flops * static_cast<double>(run.world), run.world)
                    .c_str(),
                when.c_str(), remeasure.c_str());
  } else {
    std::printf("mean MFU %.1f%% of the %s matmul peak %s (best of %d 1024^3 products, %s; %s "
                "re-measures)\n",
                mfu, dtype, peak_text(tally.peak, run.world).c_str(), tally.rank_peak.products,
                when.c_str(), remeasure.c_str());
  }
}

// --sample-tokens after --sample-prompt (an empty prompt starts a fresh document:
// <|endoftext|>, else a newline), top-k 40 at temperature 1 with the run's seed,
// ending at <|endoftext|> (or a full context when N > max_seq_len); printed as
// prompt + text.
void print_sample(TrainRun& run) {
  const data::Tokenizer& tokenizer = *run.tokenizer;
  nn::Transformer& model = *run.model;
  model.eval();  // no dropout
  const std::optional<uint32_t> eot = tokenizer.find_special(data::kEndOfText);
  std::vector<uint32_t> ids = tokenizer.encode(run.o.sample_prompt);
  if (ids.empty()) ids.push_back(eot.value_or(static_cast<uint32_t>('\n')));
  // The context holds max_seq_len tokens: a prompt too long for the sample after it is seen by its
  // end.
  const int64_t room = std::max<int64_t>(1, model.config().max_seq_len + 1 - run.o.sample_tokens);
  const size_t context = std::min(ids.size(), static_cast<size_t>(room));
  const std::vector<int64_t> prompt(ids.end() - static_cast<std::ptrdiff_t>(context), ids.end());
  inference::SamplingOptions s;
  s.max_tokens = run.o.sample_tokens;
  s.temperature = 1.0;
  s.top_k = 40;
  s.seed = run.o.seed;
  s.stop_token = eot ? static_cast<int64_t>(*eot) : -1;
  s.vocab_limit = static_cast<int64_t>(tokenizer.vocab_size());  // a preset's vocab may be larger
  for (const int64_t t : inference::generate(model, prompt, s).tokens)
    ids.push_back(static_cast<uint32_t>(t));
  const std::string text = tokenizer.decode(std::span<const uint32_t>(ids.data(), ids.size()));
  std::printf("--- sample ---\n%s\n--------------\n", text.c_str());
}

}  // namespace

void print_summary(TrainRun& run, const RunTally& tally) {
  const TrainOptions& o = run.o;
  const bool trained = run.step > tally.first_step;
  const double seconds = tally.run_clock.seconds();
  std::printf("done: %lld steps, %lld tokens in %.1f s", static_cast<long long>(run.step),
              static_cast<long long>(run.tokens_seen), seconds);
  if (trained) std::printf("; final loss %.4f", tally.last_loss);
  if (tally.have_eval && tally.last_eval.reward) {
    std::printf(", held-out reward %.3f", *tally.last_eval.reward);
    if (tally.last_eval.exact) std::printf(" (exact match %.3f)", *tally.last_eval.exact);
  } else if (tally.have_eval && tally.last_eval.accuracy) {
    std::printf(", val loss %.4f (reward accuracy %.3f)", tally.last_eval.loss,
                *tally.last_eval.accuracy);
  } else if (tally.have_eval) {
    std::printf(", val loss %.4f (%.3f bits/%s)", tally.last_eval.loss,
                tally.last_eval.bits_per_byte, run.tokenizer ? "byte" : "token");
  }
  std::printf("; checkpoint %s\n", (fs::path(o.out) / checkpoint_name(run.step)).string().c_str());
  if (trained && !o.rl) print_mean_mfu(run, tally);  // an RL step is mostly decoding
  if (o.finetune) {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("peak RSS %.1f MiB%s\n",
                static_cast<double>(usage.ru_maxrss) / 1024.0,  // Linux: KiB
                run.world > 1 ? " (rank 0)" : "");
  }
  report_profile(run, tally);
  if (o.sample_tokens > 0 && run.tokenizer) print_sample(run);
}

}  // namespace ember::apps
