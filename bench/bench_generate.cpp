// Generation speed (inference::generate, on the serving engine's paged KV cache):
// prefill and decode tokens/s of model presets (random weights, greedy),
// against the memory-bandwidth bound of decoding (every weight is read once
// per token: bound = read GB/s / weight bytes per token); the matrix-vector
// speed of the decode shapes; and the paged cache's bytes per token against
// nn::model_stats (what `ember info` prints).
// Usage: bench_generate [--prompt P] [--tokens N] [--reps R] [CONFIG.json...]
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "bench/bench_main.h"
#include "core/kernels/matmul.h"
#include "inference/generate.h"
#include "inference/model_runner/paged_forward.h"
#include "nn/sizing/model_stats.h"

using namespace ember;

// Best of a few passes of: a parallel sum over 512 MiB (read GB/s) and a memcpy (read + write).
static void memory_bandwidth(double& read_gbs, double& copy_gbs) {
  const size_t n = size_t{128} << 20;  // floats
  std::vector<float> a(n, 1.0f), b(n, 0.0f);
  read_gbs = copy_gbs = 0;
  for (int rep = 0; rep < 5; ++rep) {
    apps::Stopwatch watch;
    float total = 0;
#pragma omp parallel reduction(+ : total)
    {
      float acc[16] = {};  // independent lanes: the loop is bound by loads, not by add latency
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 16) {
#pragma omp simd
        for (int j = 0; j < 16; ++j) acc[j] += a[i + j];
      }
      for (const float x : acc) total += x;
    }
    read_gbs = std::max(read_gbs, n * 4.0 / watch.seconds() / 1e9);
    if (total <= 0) std::printf("(sum %f)\n", total);
    watch.restart();
    std::memcpy(b.data(), a.data(), n * 4);
    copy_gbs = std::max(copy_gbs, 2 * n * 4.0 / watch.seconds() / 1e9);
  }
}

// x [1, K] W^T with W [N, K]: the decode-time matmul of a Linear; GB/s of W read. Cycles
// through copies of W spanning 256 MB, so W comes from memory as in a model, not from cache.
static double matvec_gbs(int64_t K, int64_t N) {
  const Tensor x = Tensor::randn({1, K}, 1);
  const int64_t copies = std::max<int64_t>(1, (int64_t{256} << 20) / (N * K * 4));
  std::vector<Tensor> ws;
  for (int64_t i = 0; i < copies; ++i) {
    ws.push_back(Tensor::randn({N, K}, 2 + i, 0, DType::Float32, 0, 0.02));
  }
  const double best = apps::best_seconds({.warmup = 1, .min = 3, .max = 3}, [&] {
    for (const Tensor& w : ws) kernels::matmul(x, w, false, true);
  });
  return static_cast<double>(copies * N * K * 4) / best / 1e9;
}

// Microseconds per draw of a TokenSampler over logits [V].
static double sampler_us(const Tensor& logits, const inference::SamplingOptions& opt) {
  inference::TokenSampler sampler(opt);
  const int n = 50;
  const apps::Stopwatch watch;
  for (int i = 0; i < n; ++i) sampler.sample(logits);
  return watch.seconds() / n * 1e6;
}

struct Args {
  int64_t prompt_len = 128, new_tokens = 64;
  int reps = 3;
  std::vector<std::string> configs;
};

// The command line; false on a usage error (the usage printed).
static bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--prompt") && i + 1 < argc) {
      a.prompt_len = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      a.new_tokens = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      a.reps = std::atoi(argv[++i]);
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr,
                   "usage: bench_generate [--prompt P] [--tokens N] [--reps R] [CONFIG.json...]\n");
      return false;
    } else {
      a.configs.push_back(argv[i]);
    }
  }
  if (a.configs.empty()) a.configs = {"configs/dense-small.json", "configs/gpt2-small.json"};
  return true;
}

// Sampling cost on this model's logits (random weights: flat, top-p's worst case).
static void print_sampling_costs(const nn::Transformer& model, const std::vector<int64_t>& prompt) {
  const int64_t P = static_cast<int64_t>(prompt.size());
  const inference::InferenceModel im(model);
  inference::PagedKVStore kv(model.config(), (P + inference::kKVBlockSize - 1) / inference::kKVBlockSize);
  std::vector<int32_t> table(static_cast<size_t>(kv.n_blocks()));
  for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b);
  const Tensor logits = im.forward({{prompt.data(), P, 0, &table, false}}, kv);  // [1, V]
  inference::SamplingOptions s;
  s.temperature = 0;
  const double greedy = sampler_us(logits, s);
  s.temperature = 0.8;
  const double temp = sampler_us(logits, s);
  s.top_k = 40;
  const double top_k = sampler_us(logits, s);
  s.top_k = 0;
  s.top_p = 0.9;
  const double top_p = sampler_us(logits, s);
  std::printf(
      "%-26s sampling us/token: greedy %.0f, temperature %.0f, top-k 40 %.0f, top-p 0.9 %.0f\n",
      "", greedy, temp, top_k, top_p);
}

// One config's row: prefill and decode tokens/s (best of the reps), the decode bound at
// read_gbs, the KV-cache bytes per token; then its bytes read per token and sampling costs.
static void bench_config(const std::string& path, const Args& a, double read_gbs, double l3_bytes) {
  const nn::ModelConfig cfg = nn::ModelConfig::from_file(path);
  nn::Transformer model(cfg, 1);
  model.eval();
  const int64_t P = std::min(a.prompt_len, cfg.max_seq_len / 2);
  const int64_t N = std::min(a.new_tokens, cfg.max_seq_len - P);
  const Tensor u =
      Tensor::rand({P}, 7, 0, DType::Float64, 0, static_cast<double>(cfg.vocab_size));
  const std::vector<int64_t> prompt = u.to(DType::Int64).to_vector<int64_t>();
  inference::SamplingOptions opt;
  opt.temperature = 0;
  opt.max_tokens = N;
  inference::generate(model, prompt, opt);  // warm-up: creates the matmul primitives of both shapes
  double prefill = 0, decode = 0;
  for (int r = 0; r < a.reps; ++r) {
    const inference::GenerationResult g = inference::generate(model, prompt, opt);
    prefill = std::max(prefill, g.prefill_tokens_per_second());
    decode = std::max(decode, g.decode_tokens_per_second());
  }
  // Bytes read per decoded token: every matmul weight once (the tied lm_head is the embedding),
  // plus the KV cache at the mean context of the decode.
  const nn::ModelStats st = nn::model_stats(cfg);
  const double kv_read = static_cast<double>(st.kv_cache_bytes_per_token) * (P + N / 2.0);
  const double bytes = 4.0 * static_cast<double>(st.active_matmul_params) + kv_read;
  const double bound = read_gbs * 1e9 / bytes;
  const double kv_per_token = static_cast<double>(inference::PagedKVStore::bytes_per_block(cfg)) /
                              static_cast<double>(inference::kKVBlockSize);
  std::printf("%-26s %8ld %10.0f %10.1f %9.2f %10.1f %7.0f%% %11.0f %11ld\n",
              path.substr(path.rfind('/') + 1).c_str(), static_cast<long>(P), prefill, decode,
              1e3 / decode, bound, 100 * decode / bound, kv_per_token,
              static_cast<long>(st.kv_cache_bytes_per_token));
  std::printf("%-26s weights read per token %.0f MB%s, KV cache read per token %.1f MB\n", "",
              4.0 * static_cast<double>(st.active_matmul_params) / 1e6,
              4.0 * static_cast<double>(st.active_matmul_params) < l3_bytes
                  ? " (fit in L3: the memory bound does not apply)"
                  : "",
              kv_read / 1e6);
  print_sampling_costs(model, prompt);
}

static int run_bench(int argc, char** argv) {
  Args args;
  if (!parse_args(argc, argv, args)) return 2;

  const double l3_bytes = static_cast<double>(sysconf(_SC_LEVEL3_CACHE_SIZE));
  double read_gbs = 0, copy_gbs = 0;
  memory_bandwidth(read_gbs, copy_gbs);
  std::printf("threads %d; memory bandwidth: read %.1f GB/s, memcpy (read + write) %.1f GB/s\n",
              omp_get_max_threads(), read_gbs, copy_gbs);
  std::printf("decode matmuls x[1,K] W[N,K]^T, GB/s of W:");
  for (const auto& [K, N] : std::vector<std::pair<int64_t, int64_t>>{
           {768, 768}, {768, 3072}, {3072, 768}, {768, 50257}}) {
    std::printf("  %ldx%ld %.1f", static_cast<long>(N), static_cast<long>(K), matvec_gbs(K, N));
  }
  std::printf("\n\n%-26s %8s %10s %10s %9s %10s %8s %11s %11s\n", "config", "prompt", "prefill/s",
              "decode/s", "ms/token", "bound/s", "of bound", "KV B/token", "ember info");
  for (const std::string& path : args.configs) bench_config(path, args, read_gbs, l3_bytes);
  return 0;
}

int main(int argc, char** argv) {
  return bench::main_reporting_errors("bench_generate", [&] { return run_bench(argc, argv); });
}
