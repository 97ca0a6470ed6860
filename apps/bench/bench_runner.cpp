// The timed training steps of one `ember bench` configuration (see bench_runner.h).
#include "apps/bench/bench_runner.h"

#include <algorithm>
#include <cmath>

#include "apps/bench/causal_flops.h"
#include "apps/train/profile_report.h"
#include "apps/common/stopwatch.h"
#include "apps/train/step_phases.h"
#include "autograd/autocast.h"
#include "nn/sizing/model_stats.h"
#include "nn/transformer.h"
#include "optim/adamw.h"
#include "optim/clip.h"

namespace ember::apps {

namespace {

// Step s's random tokens: inputs x and next-token targets y, [B, T] each.
std::pair<Tensor, Tensor> random_batch(const BenchCase& c, const BenchRunOptions& o, int64_t s) {
  const int64_t B = c.batch_size, T = c.seq_len;
  EMBER_PROFILE_PHASE(kDataPhase);
  EMBER_PROFILE_SCOPE(kDataFamily);
  const Tensor ids = Tensor::rand({B, T + 1}, o.seed + 1, static_cast<uint64_t>(s * B * (T + 1)),
                                  DType::Float64, 0, static_cast<double>(c.config.vocab_size))
                         .to(DType::Int64);
  return {ids.narrow(1, 0, T).contiguous(), ids.narrow(1, 1, T).contiguous()};
}

// One step as ember train's: forward and backward under autocast, the clip 1.0 coefficient
// applied inside AdamW (lr 3e-4, docs/model.md#optimizer).
nn::LossTerms train_step(nn::Transformer& model, optim::AdamW& opt, const std::vector<Variable>& params,
                         const Tensor& x, const Tensor& y, DType autocast) {
  const double lr = 3e-4, clip = 1.0;
  opt.zero_grad();
  nn::LossTerms loss;
  {
    AutocastGuard mixed(autocast);  // forward and backward only, as ember train
    {
      EMBER_PROFILE_PHASE(kForwardPhase);
      loss = model.loss(model.forward(x), y);
    }
    {
      EMBER_PROFILE_PHASE(kBackwardPhase);
      loss.total.backward();
    }
  }
  double grad_scale = 1;
  {
    EMBER_PROFILE_PHASE(kClipPhase);
    grad_scale = optim::clip_coefficient(optim::grad_norm(params), clip);  // applied inside AdamW, as ember train
  }
  {
    EMBER_PROFILE_PHASE(kOptimizerPhase);
    opt.step(lr, grad_scale);
  }
  return loss;
}

// What the timed steps measured: each step's seconds, their median, best and mean, the last loss.
struct StepFigures {
  const std::vector<double>& seconds;
  double median, best, mean, last_ce;
};

// The result of the case: rates from the median (and best) step, % of the peak, the floor,
// the profile.
nlohmann::json case_json(const BenchCase& c, const BenchRunOptions& o, const StepFigures& f,
                         const prof::Snapshot& snap, double peak_flops, double floor_peak_flops) {
  const int64_t B = c.batch_size, T = c.seq_len;
  const double median = f.median, best = f.best;
  const nn::ModelStats st = nn::model_stats(c.config, B, T);
  const double tokens = static_cast<double>(B * T);
  const double flops = st.flops_per_token * tokens / median;
  // The floor: every FLOP the step must do at the floor peak (apps::floor_peak). A causal
  // kernel computes about half of the full T x T attention square that
  // flops_per_token counts.
  const double needed_flops = causal_flops_per_token(st) * tokens;
  std::vector<double> ms;
  for (double v : f.seconds) ms.push_back(v * 1e3);
  return {{"name", c.name},
          {"batch_size", B},
          {"seq_len", T},
          {"steps", o.steps},
          {"warmup_steps", o.warmup_steps},
          {"params", st.total_params},
          {"active_params", st.active_params},
          {"flops_per_token", st.flops_per_token},
          {"ms_per_step_median", median * 1e3},
          {"ms_per_step_best", best * 1e3},
          {"ms_per_step", ms},
          {"tokens_per_s", tokens / median},
          {"gflops", flops / 1e9},
          {"mfu_percent", 100 * flops / peak_flops},
          {"mfu_percent_best", 100 * st.flops_per_token * tokens / best / peak_flops},
          {"causal_flops_per_token", causal_flops_per_token(st)},
          {"mfu_causal_percent", 100 * needed_flops / median / peak_flops},
          {"floor_peak_gflops", floor_peak_flops / 1e9},
          {"floor_ms", 1e3 * needed_flops / floor_peak_flops},
          {"final_loss", f.last_ce},
          {"profile", profile_json(snap, o.warmup_steps, f.mean * 1e3)},
          {"profile_table", profile_table(snap, o.warmup_steps, f.mean * 1e3)}};
}

}  // namespace

nlohmann::json run_bench_case(const BenchCase& c, const BenchRunOptions& o, double peak_flops,
                              double floor_peak_flops) {
  const int64_t B = c.batch_size, T = c.seq_len;
  EMBER_CHECK(B > 0 && T > 0 && T <= c.config.max_seq_len, c.name, ": --seq-len ", T,
              " must be between 1 and the model's max_seq_len (", c.config.max_seq_len, "), --batch-size ", B,
              " positive");
  EMBER_CHECK(o.steps > 0 && o.warmup_steps >= 0, "--steps must be positive and --warmup non-negative");
  nn::Transformer model(c.config, o.seed);
  const auto params = model.parameters();
  // docs/model.md#optimizer: lr 3e-4, betas 0.9 / 0.95, eps 1e-8, wd 0.1 on >= 2-D tensors; clip 1.
  optim::AdamW opt(optim::decay_groups(model.named_parameters(), 0.1), optim::AdamWOptions{0.9, 0.95, 1e-8});

  std::vector<double> seconds;
  double last_ce = 0;
  prof::enable();
  prof::reset();
  for (int64_t s = 0; s < o.warmup_steps + o.steps; ++s) {
    const Stopwatch step;
    const auto [x, y] = random_batch(c, o, s);
    const nn::LossTerms loss = train_step(model, opt, params, x, y, o.autocast);
    const double dt = step.seconds();
    EMBER_CHECK(std::isfinite(loss.ce), c.name, ": non-finite loss at step ", s);
    last_ce = loss.ce;
    prof::end_step();
    if (s + 1 == o.warmup_steps) prof::reset();
    if (s >= o.warmup_steps) seconds.push_back(dt);
  }
  const prof::Snapshot snap = prof::snapshot();
  prof::enable(false);

  std::vector<double> sorted = seconds;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  const double best = sorted.front();
  double mean = 0;
  for (double v : seconds) mean += v / static_cast<double>(n);
  return case_json(c, o, StepFigures{seconds, median, best, mean, last_ce}, snap, peak_flops,
                   floor_peak_flops);
}

}  // namespace ember::apps
