// Activation checkpointing's trade (nn::Transformer::set_activation_checkpointing): the memory a
// training step's forward keeps for backward and the step time, with every K-th block
// checkpointed (K = 0: none). One process per K: the allocator's peak is per process.
//   kept by forward  = tensor bytes in use after the forward and loss - before (the graph's
//                      saved activations, logits included)
//   step peak        = the allocator's peak over the steps - the parameters' bytes
//                      (activations, gradients and temporaries)
//   max RSS          = the process's (getrusage), model and everything else included
// ms/step is the best forward + backward of --steps (no optimizer step); cpu ms the least process
// CPU time of one (all threads): on a shared machine, with OMP_NUM_THREADS=1
// OMP_WAIT_POLICY=PASSIVE, the figure least disturbed by other processes.
// Usage: bench_activation_checkpoint [--every K] [--steps N] [--batch B] [--seq T]
//                                    [--dtype float32|bf16] CONFIG.json
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "autograd/autocast.h"
#include "bench/bench_args.h"
#include "bench/bench_main.h"
#include "core/allocator.h"
#include "nn/transformer.h"

using namespace ember;

namespace {

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

}  // namespace

static int run_bench(int argc, char** argv) {
  int64_t every = 0;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--every") && i + 1 < argc) {
      every = std::atoll(argv[++i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  const auto args = bench::parse_model_bench_args(static_cast<int>(rest.size()), rest.data(),
                                                  "bench_activation_checkpoint", 3);
  if (!args) return 2;
  const int64_t B = args->batch, T = args->seq_len;
  const nn::ModelConfig cfg = nn::ModelConfig::from_file(args->configs[0]);
  nn::Transformer model(cfg, 1);
  model.set_activation_checkpointing(every);
  size_t param_bytes = 0;
  for (const Variable& p : model.parameters()) param_bytes += static_cast<size_t>(p.numel()) * 4;
  const Tensor ids = Tensor::rand({B, T + 1}, 3, 0, DType::Float64, 0, static_cast<double>(cfg.vocab_size)).to(DType::Int64);
  const Tensor x = ids.narrow(1, 0, T).contiguous(), y = ids.narrow(1, 1, T).contiguous();
  const DType dtype = parse_autocast_dtype(args->dtype);
  double best = 1e30, best_cpu = 1e30;
  size_t kept = 0;
  for (int s = 0; s < args->steps; ++s) {
    model.zero_grad();
    AutocastGuard mixed(dtype);
    const apps::Stopwatch clock;
    const std::clock_t cpu0 = std::clock();
    const size_t before = allocator_stats().bytes_in_use;
    nn::LossTerms loss = model.loss(model.forward(x), y);
    kept = std::max(kept, allocator_stats().bytes_in_use - before);
    loss.total.backward();
    best = std::min(best, clock.seconds());
    best_cpu = std::min(best_cpu, static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC);
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("every %lld, B %lld, T %lld, %s: %.1f ms/step (cpu %.1f ms), kept by forward %.1f MiB, step peak %.1f MiB, "
              "max RSS %.1f MiB\n",
              static_cast<long long>(every), static_cast<long long>(B), static_cast<long long>(T),
              args->dtype.c_str(), best * 1e3, best_cpu * 1e3, mib(static_cast<double>(kept)),
              mib(static_cast<double>(allocator_stats().peak_bytes_in_use - param_bytes)),
              static_cast<double>(usage.ru_maxrss) / 1024.0);
  return 0;
}

int main(int argc, char** argv) {
  return bench::main_reporting_errors("bench_activation_checkpoint", [&] { return run_bench(argc, argv); });
}
