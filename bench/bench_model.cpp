// Forward + backward time of model presets at B x T: ms per step, tokens/s,
// achieved model GFLOP/s (nn::model_stats FLOPs) and the fraction of the
// matmul peak (float32 1024^3 products, apps::measure_peak as `ember bench`).
// Usage: bench_model [--steps N] [--batch B] [--seq T] CONFIG.json...
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/common/matmul_peak.h"
#include "apps/common/stopwatch.h"
#include "autograd/grad_mode.h"
#include "bench/bench_args.h"
#include "bench/bench_main.h"
#include "nn/sizing/model_stats.h"
#include "nn/transformer.h"

using namespace ember;

static int run_bench(int argc, char** argv) {
  const auto args = bench::parse_model_bench_args(argc, argv, "bench_model", 5);
  if (!args) return 2;
  const int steps = args->steps;
  const int64_t B = args->batch, T = args->seq_len;
  const std::vector<std::string>& configs = args->configs;
  const double peak = apps::measure_peak().flops / 1e9;
  std::printf("threads %d, matmul peak (float32 1024^3) %.1f GFLOP/s\n", omp_get_max_threads(), peak);
  std::printf("%-28s %10s %10s %10s %8s %12s\n", "config", "ms/step", "tokens/s", "GFLOP/s", "%peak",
              "MFLOP/token");
  for (const std::string& path : configs) {
    const nn::ModelConfig cfg = nn::ModelConfig::from_file(path);
    nn::Transformer model(cfg, 1);
    const Tensor ids = Tensor::rand({B, T + 1}, 3, 0, DType::Float64, 0, static_cast<double>(cfg.vocab_size))
                           .to(DType::Int64);
    const Tensor x = ids.narrow(1, 0, T).contiguous(), y = ids.narrow(1, 1, T).contiguous();
    std::vector<double> times;
    for (int s = 0; s < steps + 1; ++s) {
      model.zero_grad();
      const apps::Stopwatch step;
      nn::LossTerms loss = model.loss(model.forward(x), y);
      loss.total.backward();
      if (s > 0) times.push_back(step.seconds());  // step 0 warms caches and primitives
    }
    std::sort(times.begin(), times.end());
    const double t = times[times.size() / 2];
    const nn::ModelStats st = nn::model_stats(cfg, B, T);
    const double gflops = st.flops_per_token * B * T / t / 1e9;
    std::printf("%-28s %10.1f %10.0f %10.1f %7.1f%% %12.1f\n", path.c_str(), t * 1e3, B * T / t,
                gflops, 100 * gflops / peak, st.flops_per_token / 1e6);
  }
  return 0;
}

int main(int argc, char** argv) {
  return bench::main_reporting_errors("bench_model", [&] { return run_bench(argc, argv); });
}
