// Forward + backward time of model presets at B x T: ms per step, tokens/s,
// achieved model GFLOP/s (nn::model_stats FLOPs) and the fraction of the
// matmul peak measured here (float32 1024^3 through kernels::matmul).
// Usage: bench_model [--steps N] [--batch B] [--seq T] CONFIG.json...
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/kernels/matmul.h"
#include "nn/model_stats.h"
#include "nn/transformer.h"

using namespace ember;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

static double matmul_peak_gflops() {
  const int64_t n = 1024;
  Tensor a = Tensor::randn({n, n}, 1), b = Tensor::randn({n, n}, 2);
  double best = 1e9;
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = Clock::now();
    Tensor c = kernels::matmul(a, b);
    best = std::min(best, seconds_since(t0));
  }
  return 2.0 * n * n * n / best / 1e9;
}

int main(int argc, char** argv) {
  int steps = 5;
  int64_t B = 8, T = 256;
  std::vector<std::string> configs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) {
      B = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seq") && i + 1 < argc) {
      T = std::atoll(argv[++i]);
    } else {
      configs.push_back(argv[i]);
    }
  }
  if (configs.empty()) {
    std::fprintf(stderr, "usage: bench_model [--steps N] [--batch B] [--seq T] CONFIG.json...\n");
    return 2;
  }
  const double peak = matmul_peak_gflops();
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
      const auto t0 = Clock::now();
      nn::LossTerms loss = model.loss(model.forward(x), y);
      loss.total.backward();
      if (s > 0) times.push_back(seconds_since(t0));  // step 0 warms caches and primitives
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
