// apps::run_bench_case on a tiny model: the JSON figures it derives from the
// step times and the given peaks, against hand counts of the model's FLOPs;
// and apps::floor_peak's rule on given peaks.
#include <catch2/catch.hpp>
#include <string>

#include "apps/bench/bench_cases.h"
#include "apps/bench/bench_runner.h"
#include "apps/bench/causal_flops.h"
#include "apps/common/matmul_peak.h"

using namespace ember;

TEST_CASE("bench floor: the step's FLOPs, causal attention halved, at the floor peak", "[bench]") {
  // d 16, 2 layers, 4 heads of 4 (qd 16), 2 kv heads (kvd 8), SwiGLU hidden 32, vocab 40 tied.
  const apps::BenchCase c{"tiny",
                          nn::ModelConfig::from_json(R"({"vocab_size": 40, "d_model": 16, "n_layers": 2,
                              "n_heads": 4, "n_kv_heads": 2, "ffn_hidden": 32, "max_seq_len": 16})"),
                          2, 16};
  const nlohmann::json j = apps::run_bench_case(c, apps::BenchRunOptions{1, 0, 7}, 4e9, 2e9);
  // Weights a token multiplies with: per layer q 16x16, k and v 16x8, o 16x16, gate / up / down 16x32;
  // the lm head 40x16. 6 FLOP per weight (forward 2, backward 4).
  const double weights = 2 * (256 + 128 + 128 + 256 + 3 * 512) + 40 * 16;
  // Attention over the full 16 x 16 square: per layer 4 products (Q K^T, P V, and two backward each)...
  // 12 x qd x T per layer in all; the causal floor counts half of it.
  const double attention_full = 2 * 12.0 * 16 * 16;
  const double tokens = 2 * 16;
  CHECK(j.at("flops_per_token").get<double>() == Approx(6 * weights + attention_full));
  CHECK(j.at("floor_peak_gflops").get<double>() == Approx(2.0));
  CHECK(j.at("floor_ms").get<double>() == Approx(1e3 * (6 * weights + attention_full / 2) * tokens / 2e9));
  const double median_s = j.at("ms_per_step_median").get<double>() / 1e3;
  CHECK(j.at("mfu_percent").get<double>() ==
        Approx(100 * (6 * weights + attention_full) * tokens / median_s / 4e9));
  CHECK(j.at("causal_flops_per_token").get<double>() == Approx(6 * weights + attention_full / 2));
  CHECK(j.at("mfu_causal_percent").get<double>() ==
        Approx(100 * (6 * weights + attention_full / 2) * tokens / median_s / 4e9));
}

TEST_CASE("bench cases: presets at their timed shapes, gpt2-small-1024 the pretraining shape", "[bench]") {
  CHECK(apps::default_bench_cases() == std::vector<std::string>{"dense-small", "moe-small", "gpt2-small"});
  const apps::BenchCase big = apps::bench_preset_case("gpt2-small-1024");
  CHECK(big.name == "gpt2-small-1024");
  CHECK(big.batch_size == 8);
  CHECK(big.seq_len == 1024);
  CHECK(big.config.d_model == 768);
  CHECK(big.config.n_layers == 12);
  CHECK(big.config.max_seq_len == 1024);
  const apps::BenchCase small = apps::bench_preset_case("gpt2-small");
  CHECK((small.batch_size == 4 && small.seq_len == 64));
  const apps::BenchCase dense = apps::bench_preset_case("dense-small");
  CHECK((dense.batch_size == 8 && dense.seq_len == 256));
  CHECK_THROWS(apps::bench_preset_case("no-such-preset"));
}

TEST_CASE("causal FLOPs: half the attention square off the PaLM count", "[bench]") {
  nn::ModelStats st;
  st.flops_per_token = 1000;
  st.attention_flops_per_token = 300;
  CHECK(apps::causal_flops_per_token(st) == 850);
  // gpt2-small at T 1024: 12 layers x 12 x 768 x 1024 attention FLOPs per token, half of them counted.
  const nn::ModelStats g = nn::model_stats(apps::bench_preset_case("gpt2-small-1024").config, 8, 1024);
  CHECK(g.attention_flops_per_token == Approx(12.0 * 12 * 768 * 1024));
  CHECK(apps::causal_flops_per_token(g) == Approx(g.flops_per_token - 6.0 * 12 * 768 * 1024));
}

TEST_CASE("bench floor peak: the better of the float32 FMA peak and the step's matmul peak", "[bench]") {
  // bf16 on AVX512-BF16 or AMX: the bf16 matmul outruns float32 FMAs, and the floor takes it.
  apps::FloorPeak p = apps::floor_peak(DType::BFloat16, 440e9, 235e9);
  CHECK(p.flops == 440e9);
  CHECK(std::string(p.source) == "bf16 matmul");
  // bf16 without bf16 instructions (emulated, slower than float32): float32 FMAs bound the step.
  p = apps::floor_peak(DType::BFloat16, 90e9, 235e9);
  CHECK(p.flops == 235e9);
  CHECK(std::string(p.source) == "float32 FMA");
  p = apps::floor_peak(DType::Float32, 215e9, 235e9);
  CHECK(p.flops == 235e9);
  CHECK(std::string(p.source) == "float32 FMA");
  p = apps::floor_peak(DType::Float32, 250e9, 235e9);
  CHECK(p.flops == 250e9);
  CHECK(std::string(p.source) == "float32 matmul");
}
