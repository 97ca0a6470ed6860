// A full training step (forward, backward, clipping, AdamW) of model presets:
// ms per step split by phase, tokens/s, model GFLOP/s and the fraction of
// the matmul peak measured here for the matmul precision (--dtype bf16:
// bfloat16 matmuls under autocast for forward and backward, autograd/autocast.h).
// "cpu ms" is the process CPU time of the step (all threads): on a shared,
// noisy machine, with OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE, the figure
// least disturbed by other processes.
// Usage: bench_train_step [--steps N] [--batch B] [--seq T] [--dtype float32|bf16] CONFIG.json...
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/matmul_peak.h"
#include "apps/common/stopwatch.h"
#include "autograd/autocast.h"
#include "bench/bench_args.h"
#include "bench/bench_main.h"
#include "nn/sizing/model_stats.h"
#include "nn/transformer.h"
#include "optim/adamw.h"
#include "optim/clip.h"

using namespace ember;

static int run_bench(int argc, char** argv) {
  const auto args = bench::parse_model_bench_args(argc, argv, "bench_train_step", 10);
  if (!args) return 2;
  const int steps = args->steps;
  const int64_t B = args->batch, T = args->seq_len;
  const std::vector<std::string>& configs = args->configs;
  const DType dtype = parse_autocast_dtype(args->dtype);
  const double peak = apps::measure_peak(3, 4, dtype).flops / 1e9;
  std::printf("threads %d, B %lld, T %lld, dtype %s, matmul peak %.1f GFLOP/s\n", omp_get_max_threads(),
              static_cast<long long>(B), static_cast<long long>(T), args->dtype.c_str(), peak);
  std::printf("%-24s %9s %9s %9s %9s %9s %10s %9s %7s %9s\n", "config", "ms/step", "fwd ms", "bwd ms",
              "clip ms", "adamw ms", "tokens/s", "GFLOP/s", "%peak", "cpu ms");
  for (const std::string& path : configs) {
    const nn::ModelConfig cfg = nn::ModelConfig::from_file(path);
    nn::Transformer model(cfg, 1);
    optim::AdamW opt(optim::decay_groups(model.named_parameters(), 0.1));
    const auto params = model.parameters();
    const Tensor ids = Tensor::rand({B, T + 1}, 3, 0, DType::Float64, 0, static_cast<double>(cfg.vocab_size)).to(DType::Int64);
    const Tensor x = ids.narrow(1, 0, T).contiguous(), y = ids.narrow(1, 1, T).contiguous();
    std::vector<std::array<double, 5>> phases;  // fwd, bwd, clip, adamw, cpu
    for (int s = 0; s < steps + 2; ++s) {
      opt.zero_grad();
      const std::clock_t cpu0 = std::clock();
      std::optional<AutocastGuard> mixed(std::in_place, dtype);  // forward and backward only
      apps::Stopwatch phase;
      nn::LossTerms loss = model.loss(model.forward(x), y);
      const double fwd = phase.lap();
      loss.total.backward();
      const double bwd = phase.lap();
      mixed.reset();
      phase.restart();
      optim::clip_grad_norm(params, 1.0);
      const double clip = phase.lap();
      opt.step(1e-4);
      const double adam = phase.lap();
      const double cpu = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
      if (s >= 2) phases.push_back({fwd, bwd, clip, adam, cpu});  // two warm-up steps
    }
    std::sort(phases.begin(), phases.end(), [](const auto& p, const auto& q) {
      return p[0] + p[1] + p[2] + p[3] < q[0] + q[1] + q[2] + q[3];
    });
    const auto& m = phases[phases.size() / 2];  // the median step
    const double t = m[0] + m[1] + m[2] + m[3];
    const nn::ModelStats st = nn::model_stats(cfg, B, T);
    const double gflops = st.flops_per_token * B * T / t / 1e9;
    const std::string name = path.substr(path.find_last_of('/') + 1);
    double cpu = 1e30;
    for (const auto& p : phases) cpu = std::min(cpu, p[4]);
    std::printf("%-24s %9.1f %9.1f %9.1f %9.1f %9.1f %10.0f %9.1f %6.1f%% %9.1f\n", name.c_str(), t * 1e3,
                m[0] * 1e3, m[1] * 1e3, m[2] * 1e3, m[3] * 1e3, B * T / t, gflops, 100 * gflops / peak,
                cpu * 1e3);
  }
  return 0;
}

int main(int argc, char** argv) {
  return bench::main_reporting_errors("bench_train_step", [&] { return run_bench(argc, argv); });
}
