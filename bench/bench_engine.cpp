// Batched decode speed of the serving engine (inference::Engine, synchronous step())
// on a model config (gpt2-small by default, random weights): for B concurrent
// greedy requests of P random prompt tokens and N output tokens (prefix cache
// off), the prefill time, decode steps/s, aggregate decode tokens/s and ms per
// step; a 512-token prompt's prefill; and the matmuls' GFLOP/s at the model's
// shapes (where a step goes), per weight type (--weights, a list: the tables side by side,
// with each type's decode tokens/s as a multiple of the first's).
// Usage: bench_engine [--prompt P] [--tokens N] [--reps R] [--batches 1,4,16]
//                     [--kv-cache-dtype float32|bfloat16] [--weights float32,bf16,int8]
//                     [--engine-only | --matmuls-only] [CONFIG.json]
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "autograd/grad_mode.h"
#include "bench/bench_main.h"
#include "core/kernels/matmul_q8.h"
#include "core/kernels/packed_weights.h"
#include "inference/engine/engine.h"
#include "nn/transformer.h"

using namespace ember;

namespace {

struct Args {
  int64_t prompt_len = 128, new_tokens = 64;
  int reps = 3;
  bool engine_only = false;   // --engine-only: just the B table (for a profiler)
  DType kv_dtype = DType::Float32;  // --kv-cache-dtype
  bool matmuls_only = false;  // --matmuls-only: just the matmul_rows table
  std::vector<int64_t> batches{1, 4, 16};
  std::vector<kernels::WeightType> weights{kernels::WeightType::Float32};  // --weights
  std::string config = "configs/gpt2-small.json";
};

bool parse_args(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--prompt") && i + 1 < argc) {
      a.prompt_len = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      a.new_tokens = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) {
      a.reps = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--batches") && i + 1 < argc) {
      a.batches.clear();
      for (char* s = argv[++i]; *s;) {
        a.batches.push_back(std::strtoll(s, &s, 10));
        if (*s == ',') ++s;
      }
    } else if (!std::strcmp(argv[i], "--kv-cache-dtype") && i + 1 < argc) {
      const std::string d = argv[++i];
      if (d != "float32" && d != "bfloat16") {
        std::fprintf(stderr, "bench_engine: --kv-cache-dtype is float32 or bfloat16, got %s\n", d.c_str());
        return false;
      }
      a.kv_dtype = inference::kv_cache_dtype_named(d);
    } else if (!std::strcmp(argv[i], "--weights") && i + 1 < argc) {
      a.weights.clear();
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        a.weights.push_back(kernels::weight_type_named(list.substr(at, end - at)));
        at = end + 1;
      }
    } else if (!std::strcmp(argv[i], "--engine-only")) {
      a.engine_only = true;
    } else if (!std::strcmp(argv[i], "--matmuls-only")) {
      a.matmuls_only = true;
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr,
                   "usage: bench_engine [--prompt P] [--tokens N] [--reps R] [--batches 1,4,16] "
                   "[--kv-cache-dtype float32|bfloat16] [--weights float32,bf16,int8] [--engine-only | "
                   "--matmuls-only] [CONFIG.json]\n");
      return false;
    } else {
      a.config = argv[i];
    }
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<int64_t> random_prompt(int64_t P, int64_t vocab, uint64_t seed) {
  const Tensor u = Tensor::rand({P}, seed, 0, DType::Float64, 0, static_cast<double>(vocab));
  return u.to(DType::Int64).to_vector<int64_t>();
}

// CPU seconds of the process (all threads): the work, whatever else loads the machine.
double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct EngineRun {
  double prefill_s = 0, decode_s = 0, decode_cpu_s = 0;
  int64_t decode_steps = 0, decode_tokens = 0;
};

// B greedy requests at once, every prompt prefilled in the first step (budget B * P), then
// decode steps until all finish. Prefill: until every request has its first token.
EngineRun run_engine(const std::shared_ptr<const inference::InferenceModel>& im, int64_t B, int64_t P,
                     int64_t N, uint64_t seed, DType kv_dtype) {
  inference::EngineOptions opt;
  opt.kv_dtype = kv_dtype;
  opt.max_seqs = B;
  opt.prefix_cache = false;
  opt.max_batch_tokens = std::max<int64_t>(256, B * P);
  opt.kv_blocks = B * ((P + N + inference::kKVBlockSize - 1) / inference::kKVBlockSize);
  inference::Engine engine(im, opt);
  std::vector<std::shared_ptr<inference::RequestHandle>> handles;
  for (int64_t b = 0; b < B; ++b) {
    inference::EngineRequest req;
    req.prompt = random_prompt(P, im->config().vocab_size, seed + static_cast<uint64_t>(b));
    req.sampling.temperature = 0;
    req.sampling.max_tokens = N;
    handles.push_back(engine.submit(std::move(req)));
  }
  EngineRun run;
  apps::Stopwatch watch;
  std::vector<int64_t> got(static_cast<size_t>(B), 0);
  bool prefilled = false;
  double cpu0 = 0;
  for (;;) {
    const bool worked = engine.step();
    int64_t with_first = 0;
    for (int64_t b = 0; b < B; ++b) {
      while (auto ev = handles[b]->next(std::chrono::milliseconds(0))) got[b] += static_cast<int64_t>(ev->tokens.size());
      with_first += got[b] > 0;
    }
    if (!worked) break;
    if (!prefilled) {
      if (with_first == B) {
        prefilled = true;
        run.prefill_s = watch.lap();
        cpu0 = cpu_seconds();
      }
    } else {
      ++run.decode_steps;
    }
  }
  run.decode_s = watch.seconds();
  run.decode_cpu_s = cpu_seconds() - cpu0;
  for (const int64_t g : got) run.decode_tokens += g - 1;
  return run;
}

// One request of P tokens at the engine's default budget (chunks of 256): seconds to its first token.
double engine_prefill(const std::shared_ptr<const inference::InferenceModel>& im, int64_t P) {
  inference::EngineOptions opt;
  opt.max_seqs = 1;
  opt.prefix_cache = false;
  opt.kv_blocks = (P + inference::kKVBlockSize - 1) / inference::kKVBlockSize;
  inference::Engine engine(im, opt);
  inference::EngineRequest req;
  req.prompt = random_prompt(P, im->config().vocab_size, 99);
  req.sampling.temperature = 0;
  req.sampling.max_tokens = 1;
  auto h = engine.submit(std::move(req));
  apps::Stopwatch watch;
  while (engine.step()) {
  }
  return watch.seconds();
}

// GFLOP/s of y[M, N] = x[M, K] W[N, K]^T (+ b) with W packed as `type` (the inference
// linears' kernel, kernels/packed_weights.h), W cycling through copies that span 256 MB, so it
// comes from memory as in a decode step (a model's weights do not stay in cache).
double matmul_gflops(int64_t M, int64_t N, int64_t K, kernels::WeightType type) {
  const Tensor x = Tensor::randn({M, K}, 1), b = Tensor::randn({N}, 3);
  std::vector<kernels::PackedWeight> ws;
  ws.emplace_back(Tensor::randn({N, K}, 2), type);
  const int64_t copies = std::max<int64_t>(1, (int64_t{256} << 20) / ws[0].nbytes());
  for (int64_t i = 1; i < copies; ++i) ws.emplace_back(Tensor::randn({N, K}, 2 + static_cast<uint64_t>(i)), type);
  Tensor y = Tensor::empty({M, N});
  const double s = apps::best_seconds({.warmup = 1, .min = 3, .max = 3}, [&] {
    for (const kernels::PackedWeight& w : ws) w.matmul(M, x.data<float>(), K, b.data<float>(), y.data<float>(), N);
  });
  return 2.0 * M * N * K * static_cast<double>(copies) / s / 1e9;
}

void print_matmuls(const nn::ModelConfig& cfg, kernels::WeightType type) {
  const int64_t C = cfg.d_model, H = cfg.ffn_hidden, V = cfg.vocab_size;
  std::printf("\n%s weights: matmul GFLOP/s, W from memory (best of 3)%s\n%-22s %8s %8s %8s %8s %8s\n",
              kernels::weight_type_name(type),
              type == kernels::WeightType::Int8 ? (std::string(", int8 path ") + kernels::matmul_q8_path()).c_str() : "",
              "shape N x K", "M=1", "M=4", "M=16", "M=64", "M=256");
  const std::vector<std::pair<int64_t, int64_t>> shapes{{C, C}, {H, C}, {C, H}, {V, C}};
  for (const auto& [N, K] : shapes) {
    std::printf("%8ld x %-11ld", static_cast<long>(N), static_cast<long>(K));
    for (const int64_t M : {1, 4, 16, 64, 256}) std::printf(" %8.1f", matmul_gflops(M, N, K, type));
    std::printf("\n");
  }
}

// One weight type's figures at one batch size, a value per rep.
struct Samples {
  std::vector<double> prefill_ms, steps_s, tok_s, ms_step, cpu_ms_step;
};

// The B table of every weight type (models[i] holds a.weights[i]), the types' runs interleaved:
// rep r of each type in turn, then rep r + 1, so that a machine whose speed drifts (a VM's
// does, by 10% within an hour) weighs on every type alike. Returns decode tokens/s per type,
// per batch.
std::vector<std::vector<double>> run_tables(const Args& a,
                                            const std::vector<std::shared_ptr<const inference::InferenceModel>>& models) {
  const int64_t P = a.prompt_len, N = a.new_tokens;
  for (const auto& im : models) run_engine(im, 1, P, 4, 1, a.kv_dtype);  // warm-up
  std::vector<std::vector<Samples>> s(models.size(), std::vector<Samples>(a.batches.size()));
  for (size_t j = 0; j < a.batches.size(); ++j) {
    for (int r = 0; r < a.reps; ++r) {
      for (size_t i = 0; i < models.size(); ++i) {
        const EngineRun run = run_engine(models[i], a.batches[j], P, N, 1000 * static_cast<uint64_t>(r + 1), a.kv_dtype);
        Samples& x = s[i][j];
        x.prefill_ms.push_back(run.prefill_s * 1e3);
        x.steps_s.push_back(run.decode_steps / run.decode_s);
        x.tok_s.push_back(run.decode_tokens / run.decode_s);
        x.ms_step.push_back(run.decode_s / run.decode_steps * 1e3);
        x.cpu_ms_step.push_back(run.decode_cpu_s / run.decode_steps * 1e3);
      }
    }
  }
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < models.size(); ++i) {
    std::printf("\n%s weights\n%4s %11s %13s %13s %9s %12s %10s\n", kernels::weight_type_name(a.weights[i]), "B",
                "prefill ms", "decode step/s", "decode tok/s", "ms/step", "cpu ms/step", "x B=1");
    double base = 0;
    out.emplace_back();
    for (size_t j = 0; j < a.batches.size(); ++j) {
      const Samples& x = s[i][j];
      const double tps = median(x.tok_s);
      if (a.batches[j] == 1) base = tps;
      out.back().push_back(tps);
      std::printf("%4ld %11.1f %13.2f %13.1f %9.2f %12.2f %10.2f\n", static_cast<long>(a.batches[j]),
                  median(x.prefill_ms), median(x.steps_s), tps, median(x.ms_step), median(x.cpu_ms_step),
                  base > 0 ? tps / base : 0);
    }
  }
  return out;
}

}  // namespace

static int run_bench(int argc, char** argv) {
  Args a;
  if (!parse_args(argc, argv, a)) return 2;
  const nn::ModelConfig cfg = nn::ModelConfig::from_file(a.config);
  nn::Transformer model(cfg, 1);
  model.eval();
  NoGradGuard no_grad;
  const int64_t P = a.prompt_len, N = a.new_tokens;
  std::printf("%s, %d threads, prompt %ld, output %ld tokens, greedy, prefix cache off, %s KV cache, "
              "median of %d (the weight types' runs interleaved)\n",
              a.config.c_str(), omp_get_max_threads(), static_cast<long>(P), static_cast<long>(N),
              dtype_name(a.kv_dtype), a.reps);
  if (a.matmuls_only) {
    for (const kernels::WeightType type : a.weights) print_matmuls(cfg, type);
    return 0;
  }
  std::vector<std::shared_ptr<const inference::InferenceModel>> models;
  for (const kernels::WeightType type : a.weights) models.push_back(std::make_shared<const inference::InferenceModel>(model, type));
  const std::vector<std::vector<double>> tok_s = run_tables(a, models);  // per weight type, per batch
  for (size_t i = 0; i < models.size() && !a.engine_only; ++i) {
    const int64_t LP = std::min<int64_t>(512, cfg.max_seq_len);
    std::vector<double> pf;
    for (int r = 0; r < a.reps; ++r) pf.push_back(engine_prefill(models[i], LP));
    std::printf("\n%s weights: prefill of a %ld-token prompt (engine, chunks of 256): %.1f ms (%.0f tokens/s)\n",
                kernels::weight_type_name(a.weights[i]), static_cast<long>(LP), median(pf) * 1e3, LP / median(pf));
    print_matmuls(cfg, a.weights[i]);
  }
  if (tok_s.size() < 2) return 0;
  std::printf("\ndecode tokens/s as a multiple of %s's\n%6s", kernels::weight_type_name(a.weights[0]), "B");
  for (const kernels::WeightType type : a.weights) std::printf(" %10s", kernels::weight_type_name(type));
  std::printf("\n");
  for (size_t i = 0; i < a.batches.size(); ++i) {
    std::printf("%6ld", static_cast<long>(a.batches[i]));
    for (const auto& t : tok_s) std::printf(" %10.2f", t[i] / tok_s[0][i]);
    std::printf("\n");
  }
  return 0;
}

int main(int argc, char** argv) {
  return bench::main_reporting_errors("bench_engine", [&] { return run_bench(argc, argv); });
}
