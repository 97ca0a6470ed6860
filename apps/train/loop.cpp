// The training loop, flat as llm.c's: each step is batch -> forward -> backward
// (x --grad-accum) -> clip -> AdamW, then the step is logged, evaluated every
// --eval-every and saved every --save-every. SIGINT/SIGTERM end the run at the
// same step on every rank, with a checkpoint.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "apps/train/closed_stdout.h"
#include "apps/train/metrics_log.h"
#include "apps/train/rl_run.h"
#include "apps/train/run_files.h"
#include "apps/train/run.h"
#include "apps/train/step_progress.h"
#include "apps/train/step_phases.h"
#include "apps/common/stop_signals.h"
#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "core/allocator.h"
#include "core/profiler.h"
#include "dist/consistency.h"
#include "optim/clip.h"
#include "apps/train/pipeline_run.h"
#include "apps/train/tensor_parallel_run.h"

namespace ember::apps {
namespace {

using nlohmann::json;

std::atomic<int> g_stop_signal{0};
std::optional<StopSignalScope> g_stop_scope;  // SIGINT/SIGTERM -> g_stop_signal while the loop runs

void restore_default_signals() { g_stop_scope.reset(); }

struct ProfilerSwitch {  // --profile: on for the loop, off again however the run ends
  bool on;
  explicit ProfilerSwitch(bool profile) : on(profile) {
    if (on) prof::enable();
  }
  ~ProfilerSwitch() {
    if (on) prof::enable(false);
  }
};

// batch -> forward -> backward for each micro-batch, in --dtype's matmul precision;
// the reducer all-reduces the last micro-batch's gradients during its backward.
void forward_backward(TrainRun& run, StepResult& s) {
  const TrainOptions& o = run.o;
  dist::Reducer* reducer = run.optimization.reducer.get();
  const double accum = static_cast<double>(o.grad_accum);
  AutocastGuard mixed(run.autocast);  // forward and backward only
  for (int64_t u = 0; u < o.grad_accum; ++u) {
    if (reducer) reducer->set_sync(u == o.grad_accum - 1);
    Tensor x, y;
    {
      EMBER_PROFILE_PHASE(kDataPhase);
      EMBER_PROFILE_SCOPE(kDataFamily);
      const Tensor b = run.loader->batch(run.step, u);
      x = b.narrow(1, 0, o.seq_len).contiguous();
      y = b.narrow(1, 1, o.seq_len).contiguous();
    }
    nn::LossTerms l;
    {
      EMBER_PROFILE_PHASE(kForwardPhase);
      l = run.model->loss(run.model->forward(x), y);
    }
    {
      EMBER_PROFILE_PHASE(kBackwardPhase);
      (o.grad_accum > 1 ? l.total / accum : l.total).backward();
    }
    s.ce += l.ce / accum;
    s.z += l.z / accum;
    s.aux += l.aux / accum;
  }
  if (reducer) {
    EMBER_PROFILE_PHASE(kCommWaitPhase);
    reducer->finish();
  }
}

// Clipping: the norm here, the scaling fused into the optimizer's pass
// (grad_scale) instead of a pass of its own over every gradient; ZeRO-1/2/3
// clip their shard of the gradient in place (the norm is the global one), except under --tp /
// --pp, where ZeRO-1's shard is scaled by grad_scale in its update.
void clip_gradients(TrainRun& run, StepResult& s) {
  EMBER_PROFILE_PHASE(kClipPhase);
  if (run.tp_group || run.pp_group) {  // each parameter counted once over the ranks (and shards)
    s.norm = parallel_grad_norm(run);
    s.grad_scale = optim::clip_coefficient(s.norm, run.o.clip);  // ZeroAdamW scales its shard
  } else if (run.o.zero) {
    s.norm = run.optimization.reducer->clip_grad_norm(run.o.clip);
  } else {
    s.norm = optim::grad_norm(run.params);
    s.grad_scale = optim::clip_coefficient(s.norm, run.o.clip);
  }
}

// The mean over ranks: every rank logs and checks the same loss, so a
// non-finite one stops every rank before the update.
void average_and_check_loss(TrainRun& run, StepResult& s) {
  if (run.world > 1) {
    EMBER_PROFILE_PHASE(kCommWaitPhase);
    const std::vector<double> mean =
        run.comm.all_reduce(std::vector<double>{s.ce, s.z, s.aux}, dist::ReduceOp::Average);
    s.ce = mean[0], s.z = mean[1], s.aux = mean[2];
  }
  agreed(run.comm, [&] {  // the same on every rank: rank 0 reports it once
    EMBER_CHECK(std::isfinite(s.ce) && std::isfinite(s.norm), "step ", run.step, ": non-finite ",
                std::isfinite(s.ce) ? "gradient norm" : "loss", " (loss ", s.ce, ", grad norm ",
                s.norm, "); stopped before the update, no checkpoint written");
  });
}

// The update on the gradients of a step: clip -> check -> AdamW.
void update(TrainRun& run, StepResult& s) {
  // ZeRO-3: the non-block parameters (and any block a backward did not reach) go until the
  // next forward; the update works on the shards.
  if (run.optimization.sharded) run.optimization.sharded->release_all();
  clip_gradients(run, s);
  average_and_check_loss(run, s);
  {
    EMBER_PROFILE_PHASE(kOptimizerPhase);
    run.optimization.optimizer->step(s.lr, s.grad_scale);
  }
}

// One optimizer step: batch -> forward -> backward (x grad_accum) -> clip -> AdamW; ember rl:
// rollouts, scores, then --iterations of forward -> backward -> clip -> AdamW.
StepResult train_step(TrainRun& run) {
  optim::Optimizer& opt = *run.optimization.optimizer;
  StepResult s;
  s.lr = optim::lr_at(run.schedule, run.step);
  if (run.rl) {
    rl_step(run, s, [&run](StepResult& u) { update(run, u); });
    return s;
  }
  opt.zero_grad();
  if (run.pair_loader && run.o.reward) {
    reward_forward_backward(run, s);
  } else if (run.pair_loader) {
    align_forward_backward(run, s);
  } else if (run.chat_loader) {
    chat_forward_backward(run, s);
  } else if (run.pipeline) {
    pipeline_forward_backward(run, s);
  } else {
    forward_backward(run, s);
  }
  update(run, s);
  return s;
}

// Rank 0 evaluates (validated as trained: same matmul precision); a
// non-finite loss stops every rank. Under ZeRO-3 every rank runs the same
// evaluation, so the blocks gather their parameters one at a time (the
// model's residency hooks are collective) rather than all 4P on every rank.
void evaluate_step(TrainRun& run, RunTally& tally, json& record) {
  // ZeRO-3: every rank (a collective forward); --tp, --pp: every rank of data index 0.
  const bool layout = run.tp_group || run.pp_group;
  const bool takes_part = run.optimization.sharded || (layout ? run.data_rank == 0 : run.root);
  agreed(run.comm, [&] {
    if (!takes_part) return;
    const ShardLoss result = validation_loss(run, tally, record);
    if (!run.root) return;
    tally.last_eval = result;
    tally.have_eval = true;
    EMBER_CHECK(std::isfinite(tally.last_eval.loss), "step ", run.step,
                ": non-finite validation loss (", tally.last_eval.loss,
                "); the run diverged, no checkpoint written");
  });
}

bool has_validation(const TrainRun& run) {
  return (run.val_loader && run.eval_batches > 0) || run.chat_val_rows || run.val_pairs ||
         (run.rl && !run.rl->held_out.empty());
}

// A fine-tuning run's start: the held-out loss of the base, printed and logged as step 0.
void log_base_validation(TrainRun& run, MetricsLog& metrics) {
  json record = {{"step", 0}, {"tokens", 0}};
  ShardLoss before;
  RunTally tally;
  const HeldParameters held(run.optimization);  // ZeRO-3: gathered
  agreed(run.comm, [&] {
    // --tp, --pp: every rank of data index 0 (a collective forward, through the stages).
    if ((run.tp_group || run.pp_group) ? run.data_rank != 0 : !run.root) return;
    before = validation_loss(run, tally, record);
  });
  metrics.append(record.dump());
  if (!run.root) return;
  if (before.reward) {
    std::printf("step 0: held-out reward %.3f", *before.reward);
    if (before.exact) std::printf(" (exact match %.3f)", *before.exact);
    std::printf(" before RL\n");
  } else if (before.accuracy) {
    std::printf("step 0: val loss %.4f (reward accuracy %.3f) before %s\n", before.loss,
                *before.accuracy, run.o.reward ? "training" : "alignment");
  } else {
    std::printf("step 0: val loss %.4f (%.3f bits/byte) before fine-tuning\n", before.loss,
                before.bits_per_byte);
  }
  std::fflush(stdout);
}

bool every(int64_t n, int64_t step) {
  return n > 0 && step % n == 0;
}
bool save_due(const TrainRun& run) {
  return every(run.o.save_every, run.step) || run.step == run.o.steps;
}

// The step's model FLOPs and time join the run's; returns its MFU. A step faster than the
// peak shows the peak was measured low: the peak becomes the step's rate (MFU 1) for the
// rest of the run, and the summary says so.
double count_step_flops(const TrainRun& run, RunTally& tally, double dt) {
  const double flops = run.stats.flops_per_token * static_cast<double>(run.tokens_per_step);
  tally.flops += flops;
  tally.step_seconds += dt;
  if (flops / dt > tally.peak) {
    tally.peak = flops / dt;
    tally.peak_raised = true;
  }
  return flops / dt / tally.peak;
}

// The matmul peak MFU divides by: rank 0's cached one; else every rank measures it at once
// (sharing the machine as they will in training) and rank 0 caches it. A cache that cannot
// be written is one note on stderr; the run goes on.
void find_peak(TrainRun& run, RunTally& tally) {
  const nlohmann::json key = peak_cache_key(run.autocast);
  tally.peak_cache = peak_cache_path();
  std::optional<CachedPeak> cached;
  if (run.root) cached = find_cached_peak(tally.peak_cache, key);
  tally.peak_cached = !run.comm.any(run.root && !cached);
  if (tally.peak_cached) {
    if (cached) tally.rank_peak = *cached;  // rank 0: the others print no MFU
  } else {
    tally.rank_peak = measure_peak_now(run.autocast);
    const std::string failed =
        run.root ? store_cached_peak(tally.peak_cache, key, tally.rank_peak) : "";
    if (!failed.empty()) {
      std::fprintf(stderr,
                   "ember: note: the matmul peak is not cached (%s); the next run measures it "
                   "again\n",
                   failed.c_str());
    }
    if (run.root) {
      std::printf("matmul peak: %.1f GFLOP/s measured (%s, best of %d 1024^3 products)%s%s\n",
                  tally.rank_peak.flops / 1e9, run.autocast == DType::BFloat16 ? "bf16" : "float32",
                  tally.rank_peak.products, failed.empty() ? "; cached in " : "",
                  failed.empty() ? tally.peak_cache.c_str() : "");
      std::fflush(stdout);
    }
  }
  tally.peak = tally.rank_peak.flops * static_cast<double>(run.world);
}

// --pp: each stage's times in the record, and in the sums of --profile.
void log_stage_times(const StepResult& s, RunTally& tally, json& m) {
  m["pp_forward_ms"] = s.stage_forward_ms;
  m["pp_backward_ms"] = s.stage_backward_ms;
  m["pp_wait_ms"] = s.stage_wait_ms;
  m["pp_idle"] = idle_share(s);
  const auto add = [](std::vector<double>& sum, const std::vector<double>& v) {
    sum.resize(v.size(), 0.0);
    for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
  };
  add(tally.stage_forward_ms, s.stage_forward_ms);
  add(tally.stage_backward_ms, s.stage_backward_ms);
  add(tally.stage_wait_ms, s.stage_wait_ms);
}

// The step just taken, after its checks: the metrics record, the validation when
// due, the ranks' parameter checksums, and the progress line.
void log_step(TrainRun& run, RunTally& tally, MetricsLog& metrics, TrainProgress& progress,
              const StepResult& s, double dt) {
  const TrainOptions& o = run.o;
  const double elapsed = tally.run_clock.seconds();
  const double tok_s = static_cast<double>(run.tokens_per_step) / dt;
  const double mfu = count_step_flops(run, tally, dt);
  const double eta = elapsed / static_cast<double>(run.step - tally.first_step) *
                     static_cast<double>(o.steps - run.step);
  json m = {{"step", run.step},
            {"loss", s.ce},
            {"z", s.z},
            {"aux", s.aux},
            {"lr", s.lr},
            {"grad_norm", s.norm},
            {"tokens", run.tokens_seen},
            {"tokens_per_s", tok_s},
            {"ms_per_step", dt * 1e3},
            {"mfu", mfu},
            {"flops", run.stats.flops_per_token * static_cast<double>(run.tokens_per_step)},
            {"peak_flops", tally.peak},
            {"eta_s", eta}};
  if (s.trained_tokens >= 0) m["trained_tokens"] = s.trained_tokens;
  if (!s.stage_wait_ms.empty()) log_stage_times(s, tally, m);
  if (!s.metrics.empty()) {  // align, reward: the pair metrics; no z-loss or MoE aux terms
    m.erase("z");
    m.erase("aux");
    for (const auto& [key, value] : s.metrics) m[key] = value;
  }
  if (run.rl) {  // a step is mostly decoding: the training FLOPs of its tokens are no measure
    for (const char* key : {"mfu", "flops", "peak_flops"}) m.erase(key);
  }
  const bool eval_now =
      has_validation(run) && (every(o.eval_every, run.step) || run.step == o.steps);
  // ZeRO-3 keeps one copy of each parameter (every rank gathers the same): nothing can diverge.
  // --tp: the data-parallel ranks of each shard are compared (tensor ranks hold different ones).
  const bool check_now = run.data_world > 1 && o.check_every > 0 && !run.optimization.sharded &&
                         (run.step % o.check_every == 0 || run.step == o.steps);
  if (eval_now) evaluate_step(run, tally, m);
  if (check_now) dist::check_parameters_consistent(run.data_parallel(), run.params, run.step);
  metrics.append(m.dump());
  if (!run.root) return;
  StepReport r{run.step,
                     o.steps,
                     s.ce,
                     s.lr,
                     s.norm,
                     tok_s,
                     dt * 1e3,
                     mfu,
                     eta,
                     eval_now,
                     tally.last_eval.loss,
                     tally.last_eval.bits_per_byte,
                     run.tokenizer.has_value(),
                     tally.last_eval.accuracy,
                     s.stage_wait_ms.empty() ? std::nullopt : std::optional<double>(idle_share(s)),
                     std::nullopt,
                     std::nullopt,
                     std::nullopt};
  if (run.rl) {
    r.mfu = NAN;
    r.reward = m.at("reward").get<double>();
    r.val_reward = tally.last_eval.reward;
    r.val_exact = tally.last_eval.exact;
  }
  progress.step(r, every(o.log_every, run.step) || run.step == o.steps ||
                       run.step == tally.first_step + 1 || eval_now);
  continue_if_stdout_closed();
}

// --profile: the step's time; the averages start after the warm-up.
void end_profiled_step(RunTally& tally, int64_t step, double dt) {
  prof::end_step();
  tally.profiled_seconds += dt;
  if (step - tally.first_step == tally.profile_warmup) {
    prof::reset();
    tally.profiled_seconds = 0;
    tally.stage_forward_ms.clear();
    tally.stage_backward_ms.clear();
    tally.stage_wait_ms.clear();
  }
}

// Every rank stops at the same step when any rank got the signal: a checkpoint
// (unless this step wrote one), the line naming it, and the shell's code for
// "ended by this signal" (130 for Ctrl-C).
int stop_on_signal(TrainRun& run, const RunTally& tally, TrainProgress& progress) {
  const std::string name =
      save_due(run) ? checkpoint_name(run.step) : save_checkpoint(run, run.step);
  progress.clear();
  // The signal some rank got (the highest), so that every rank exits alike.
  int sig = g_stop_signal.load();
  if (run.world > 1)
    sig = static_cast<int>(run.comm.all_reduce(static_cast<double>(sig), dist::ReduceOp::Max));
  if (sig == 0) sig = SIGTERM;
  if (run.root) {
    std::printf("stopped by signal %d at step %lld; checkpoint %s\n", sig,
                static_cast<long long>(run.step), name.c_str());
    std::fflush(stdout);
  }
  restore_default_signals();
  report_profile(run, tally);
  return 128 + sig;
}

}  // namespace

ShardLoss validation_loss(TrainRun& run, RunTally& tally, json& record) {
  if (run.rl) {  // the held-out prompts' greedy completions: val_reward, val_exact
    ShardLoss r;
    for (const auto& [key, value] : rl_validation(run)) {
      record["val_" + key] = value;
      (key == "reward" ? r.reward : r.exact) = value;
    }
    r.loss = *r.reward;  // what the checks and the plot read
    return r;
  }
  if (run.val_pairs) {  // align, reward: the pair metrics; loss and the reward accuracy
    tally.last_align_eval = run.o.reward ? reward_validation(run) : align_validation(run);
    ShardLoss r;
    for (const auto& [key, value] : tally.last_align_eval) {
      record["val_" + key] = value;
      if (key == "loss") r.loss = value;
      if (key == "rewards/accuracy" || key == "accuracy") r.accuracy = value;
    }
    return r;
  }
  const ShardLoss r = validation_loss(run);
  record["val_loss"] = r.loss;
  record["val_bpb"] = r.bits_per_byte;
  return r;
}

ShardLoss validation_loss(TrainRun& run) {
  AutocastGuard eval_mixed(run.autocast);
  if (run.pipeline) return run.chat_val_rows ? pipeline_chat_loss(run) : pipeline_shard_loss(run);
  if (run.chat_val_rows) {
    return chat_shard_loss(*run.model, run.chat_val_rows, run.data_world * run.o.batch_size,
                         run.token_bytes);
  }
  return shard_loss(*run.model, *run.val_loader, run.eval_batches, run.token_bytes);
}

int train_loop(TrainRun& run) {
  const TrainOptions& o = run.o;
  g_stop_signal = 0;
  g_stop_scope.emplace(g_stop_signal);
  RunTally tally;
  find_peak(run, tally);
  MetricsLog metrics(run.root ? (std::filesystem::path(o.out) / "metrics.jsonl").string() : "");
  // Plain lines, plus a bar redrawn in place when stdout is a terminal (not under mpirun).
  TrainProgress progress(stdout, run.root && TrainProgress::wants_bar());
  tally.run_clock.restart();
  tally.first_step = run.step;
  // --profile: the first step (two of a longer run) is warm-up, left out of the averages.
  const int64_t to_run = o.steps - tally.first_step;
  tally.profile_warmup = std::max<int64_t>(0, std::min<int64_t>(to_run > 10 ? 2 : 1, to_run - 1));
  if (o.finetune && run.step == 0 && has_validation(run)) log_base_validation(run, metrics);
  ProfilerSwitch profiler_switch(o.profile);
  while (run.step < o.steps) {
    const Stopwatch step_clock;
    const StepResult s = train_step(run);
    ++run.step;
    run.tokens_seen += run.tokens_per_step;
    tally.last_loss = s.ce;
    const double dt = step_clock.seconds();
    log_step(run, tally, metrics, progress, s, dt);
    if (save_due(run)) save_checkpoint(run, run.step);
    if (o.profile) end_profiled_step(tally, run.step, dt);
    if (run.comm.any(g_stop_signal != 0)) return stop_on_signal(run, tally, progress);
  }
  // A --resume already at --steps trains nothing; its checkpoint is written
  // again into --out, so that the run ends with one and `latest` names it
  // (a run killed between a checkpoint and `latest` left it pointing earlier).
  if (run.step == tally.first_step) save_checkpoint(run, run.step);
  restore_default_signals();
  progress.clear();
  // ZeRO-3: the sample reads every parameter. The run is over (its checkpoint written), so the
  // optimizer's moments (8P/W bytes a rank) go first: gathering the 4P of parameters
  // then costs no more than they did (gpt2-small, W = 2, B 1 x T 128, 4 steps, a 32-token
  // sample: VmHWM 2052 / 1974 -> 1524 / 1487 MiB per rank; 1499 / 1486 without the sample).
  const bool sample = o.sample_tokens > 0 && run.tokenizer.has_value();
  if (sample && run.optimization.sharded) {
    run.optimization.optimizer.reset();
    allocator_empty_cache();  // cached blocks of the moments' size would not serve the gathers
  }
  const HeldParameters held(run.optimization, sample);
  if (run.root) print_summary(run, tally);
  return 0;
}

}  // namespace ember::apps
