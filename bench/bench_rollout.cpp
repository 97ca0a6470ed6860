// RL rollouts (inference/rollout/rollout.h) against generating the same completions one by one
// through inference::generate (what `ember generate` runs): N prompts of P random tokens, G
// completions each of exactly T new tokens (no stop token, temperature 1) on a model config
// (dense-small with ember train's 1024-token vocabulary by default, random weights). Prints
// each way's tokens/s (best of R), the ratio, the prompt tokens each way prefilled, and
// whether both drew the same tokens (the per-completion seeds make them equal).
// Usage: bench_rollout [--prompts N] [--group G] [--prompt P] [--tokens T] [--reps R]
//                      [--vocab V] [--batched-only] [CONFIG.json]
//   (run from the source folder)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "bench/bench_main.h"
#include "core/tensor.h"
#include "inference/generate.h"
#include "inference/rollout/rollout.h"
#include "nn/transformer.h"

using namespace ember;

namespace {

struct Args {
  int64_t prompts = 8, group = 8, prompt_len = 32, tokens = 64, vocab = 1024;
  int reps = 2;
  bool batched_only = false;  // --batched-only: just the rollout (for a profiler)
  std::string config = "configs/dense-small.json";
};

bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    const bool more = i + 1 < argc;
    if (!std::strcmp(argv[i], "--prompts") && more) {
      a.prompts = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--group") && more) {
      a.group = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--prompt") && more) {
      a.prompt_len = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tokens") && more) {
      a.tokens = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--reps") && more) {
      a.reps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--vocab") && more) {
      a.vocab = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--batched-only")) {
      a.batched_only = true;
    } else if (argv[i][0] != '-') {
      a.config = argv[i];
    } else {
      std::fprintf(stderr, "usage: bench_rollout [--prompts N] [--group G] [--prompt P] [--tokens T] "
                           "[--reps R] [--vocab V] [--batched-only] [CONFIG.json]\n");
      return false;
    }
  }
  return a.prompts > 0 && a.group >= 2 && a.prompt_len > 0 && a.tokens > 0 && a.reps > 0;
}

std::vector<std::vector<int64_t>> random_prompts(const Args& a) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t p = 0; p < a.prompts; ++p) {
    const Tensor u = Tensor::rand({a.prompt_len}, 1000 + static_cast<uint64_t>(p), 0,
                                  DType::Float64, 0, static_cast<double>(a.vocab));
    out.push_back(u.to(DType::Int64).to_vector<int64_t>());
  }
  return out;
}

// The same completions as rollout(): each prompt's G seeds, one generate() call each.
std::vector<std::vector<int64_t>> one_by_one(const nn::Transformer& model,
                                             const std::vector<std::vector<int64_t>>& prompts,
                                             const inference::RolloutOptions& opt) {
  std::vector<std::vector<int64_t>> out;
  for (size_t p = 0; p < prompts.size(); ++p) {
    for (int64_t g = 0; g < opt.group_size; ++g) {
      inference::SamplingOptions s;
      s.max_tokens = opt.max_tokens;
      s.temperature = opt.temperature;
      s.seed = inference::completion_seed(opt.seed, static_cast<int64_t>(p), g);
      out.push_back(inference::generate(model, prompts[p], s).tokens);
    }
  }
  return out;
}

}  // namespace

static int run_bench(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) return 2;
  nn::ModelConfig cfg = nn::ModelConfig::from_file(a.config);
  cfg.vocab_size = a.vocab;
  const nn::Transformer model(cfg, 1);
  const std::vector<std::vector<int64_t>> prompts = random_prompts(a);
  inference::RolloutOptions opt;
  opt.group_size = a.group;
  opt.max_tokens = a.tokens;
  opt.seed = 7;
  const double total = static_cast<double>(a.prompts * a.group * a.tokens);
  double batched = 1e30, single = 1e30;
  inference::Rollout r;
  std::vector<std::vector<int64_t>> alone;
  for (int rep = 0; rep < a.reps; ++rep) {
    apps::Stopwatch watch;
    r = inference::rollout(model, prompts, opt);
    batched = std::min(batched, watch.lap());
    if (a.batched_only) continue;
    alone = one_by_one(model, prompts, opt);
    single = std::min(single, watch.lap());
  }
  if (a.batched_only) {
    std::printf("batched rollout: %.3f s, %.1f tokens/s\n", batched, total / batched);
    return 0;
  }
  bool same = true;
  for (int64_t i = 0; i < a.prompts * a.group; ++i) {
    same = same && alone[static_cast<size_t>(i)] ==
                       r.groups[static_cast<size_t>(i / a.group)][static_cast<size_t>(i % a.group)].tokens;
  }
  int64_t params = 0;
  for (const Variable& v : model.parameters()) params += v.numel();
  std::printf("%s (vocab %ld, %.1fM parameters): %ld prompts x G = %ld, %ld prompt tokens, %ld new "
              "tokens each (best of %d)\n",
              a.config.c_str(), static_cast<long>(a.vocab), static_cast<double>(params) / 1e6,
              static_cast<long>(a.prompts), static_cast<long>(a.group), static_cast<long>(a.prompt_len),
              static_cast<long>(a.tokens), a.reps);
  std::printf("batched rollout : %8.3f s  %8.1f tokens/s  prefilled %ld of %ld prompt tokens, %ld engine steps\n",
              batched, total / batched, static_cast<long>(r.stats.prefilled_tokens),
              static_cast<long>(r.stats.prompt_tokens), static_cast<long>(r.stats.steps));
  std::printf("one by one      : %8.3f s  %8.1f tokens/s  prefilled %ld of %ld prompt tokens\n", single,
              total / single, static_cast<long>(a.prompts * a.group * a.prompt_len),
              static_cast<long>(a.prompts * a.group * a.prompt_len));
  std::printf("ratio           : %8.2fx  same tokens: %s\n", single / batched, same ? "yes" : "NO");
  return same ? 0 : 1;
}

int main(int argc, char** argv) {
  return bench::main_reporting_errors("bench_rollout", [&] { return run_bench(argc, argv); });
}
