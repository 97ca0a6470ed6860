// Command line shared by the model benchmarks:
//   NAME [--steps N] [--batch B] [--seq T] [--dtype float32|bf16] CONFIG.json...
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace ember::bench {

struct ModelBenchArgs {
  int steps = 0;
  int64_t batch = 8, seq_len = 256;
  std::string dtype = "float32";  // matmul precision (autograd/autocast.h), where the bench uses it
  std::vector<std::string> configs;
};

// nullopt (after printing the usage line) when no config is given.
inline std::optional<ModelBenchArgs> parse_model_bench_args(int argc, char** argv, const char* name,
                                                            int default_steps) {
  ModelBenchArgs a;
  a.steps = default_steps;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) {
      a.steps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--batch") && i + 1 < argc) {
      a.batch = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seq") && i + 1 < argc) {
      a.seq_len = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) {
      a.dtype = argv[++i];
    } else {
      a.configs.push_back(argv[i]);
    }
  }
  if (a.configs.empty()) {
    std::fprintf(stderr, "usage: %s [--steps N] [--batch B] [--seq T] [--dtype float32|bf16] CONFIG.json...\n", name);
    return std::nullopt;
  }
  return a;
}

}  // namespace ember::bench
