// One configuration of `ember bench`: full training steps (forward, backward,
// clip 1.0, AdamW with the defaults of docs/model.md#optimizer, as `ember train`) on
// random tokens, timed step by step with the profiler on. The result is JSON:
// ms/step (median, best, every step), tokens/s, model GFLOP/s (nn::model_stats
// FLOPs per token times tokens), % of the given matmul peak (also with causal
// attention as half the square, apps::causal_flops_per_token), the floor (the
// step's FLOPs, causal attention counted as half the square, at the given
// floor peak, apps::floor_peak: no step can be faster), and the profile.
#pragma once
#include "core/dtype.h"
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "nn/config.h"

namespace ember::apps {

struct BenchCase {
  std::string name;  // preset name or config file stem
  nn::ModelConfig config;
  int64_t batch_size = 8, seq_len = 256;
};

struct BenchRunOptions {
  int64_t steps = 10;        // timed steps
  int64_t warmup_steps = 2;  // run first, left out of every figure
  uint64_t seed = 1337;
  DType autocast = DType::Float32;  // matmul operands of forward and backward (--dtype)
};

// Runs in the calling process (`ember bench` calls it in a forked child).
// peak_flops: the matmul peak the MFU divides by; floor_peak_flops: the rate
// the floor divides by (apps::floor_peak in apps/common/matmul_peak.h).
nlohmann::json run_bench_case(const BenchCase& c, const BenchRunOptions& o, double peak_flops,
                              double floor_peak_flops);

}  // namespace ember::apps
