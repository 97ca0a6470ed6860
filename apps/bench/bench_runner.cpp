// The timed training steps of one `ember bench` configuration (see bench_runner.h).
#include "apps/bench/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "apps/bench/profile_report.h"
#include "autograd/autocast.h"
#include "nn/model_stats.h"
#include "nn/transformer.h"
#include "optim/adamw.h"
#include "optim/clip.h"

namespace ember::apps {

namespace {
using Clock = std::chrono::steady_clock;
}

nlohmann::json run_bench_case(const BenchCase& c, const BenchRunOptions& o, double peak_flops,
                              double floor_peak_flops) {
  const int64_t B = c.batch_size, T = c.seq_len;
  EMBER_CHECK(B > 0 && T > 0 && T <= c.config.max_seq_len, c.name, ": --seq-len ", T,
              " must be between 1 and the model's max_seq_len (", c.config.max_seq_len, "), --batch-size ", B,
              " positive");
  EMBER_CHECK(o.steps > 0 && o.warmup_steps >= 0, "--steps must be positive and --warmup non-negative");
  nn::Transformer model(c.config, o.seed);
  const auto params = model.parameters();
  // SPEC.md section 4 defaults: lr 3e-4, betas 0.9 / 0.95, eps 1e-8, wd 0.1 on >= 2-D tensors; clip 1.0.
  optim::AdamW opt(optim::decay_groups(model.named_parameters(), 0.1), optim::AdamWOptions{0.9, 0.95, 1e-8});
  const double lr = 3e-4, clip = 1.0;

  std::vector<double> seconds;
  double last_ce = 0;
  prof::enable();
  prof::reset();
  for (int64_t s = 0; s < o.warmup_steps + o.steps; ++s) {
    const auto t0 = Clock::now();
    Tensor x, y;
    {
      EMBER_PROFILE_PHASE(kDataPhase);
      EMBER_PROFILE_SCOPE(kDataFamily);
      const Tensor ids = Tensor::rand({B, T + 1}, o.seed + 1, static_cast<uint64_t>(s * B * (T + 1)),
                                      DType::Float64, 0, static_cast<double>(c.config.vocab_size))
                             .to(DType::Int64);
      x = ids.narrow(1, 0, T).contiguous();
      y = ids.narrow(1, 1, T).contiguous();
    }
    opt.zero_grad();
    nn::LossTerms loss;
    {
      AutocastGuard mixed(o.autocast);  // forward and backward only, as ember train
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
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
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
  const nn::ModelStats st = nn::model_stats(c.config, B, T);
  const double tokens = static_cast<double>(B * T);
  const double flops = st.flops_per_token * tokens / median;
  // The floor: every FLOP the step must do at the floor peak (apps::floor_peak). A causal
  // kernel computes about half of the full T x T attention square that
  // flops_per_token counts.
  const double needed_flops = (st.flops_per_token - st.attention_flops_per_token / 2) * tokens;
  std::vector<double> ms;
  for (double v : seconds) ms.push_back(v * 1e3);
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
          {"floor_peak_gflops", floor_peak_flops / 1e9},
          {"floor_ms", 1e3 * needed_flops / floor_peak_flops},
          {"final_loss", last_ce},
          {"profile", profile_json(snap, o.warmup_steps, mean * 1e3)},
          {"profile_table", profile_table(snap, o.warmup_steps, mean * 1e3)}};
}

}  // namespace ember::apps
