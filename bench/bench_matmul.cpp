// Prints GFLOP/s of ember::kernels::matmul (and matmul_into with beta = 1)
// next to oneDNN's own dnnl_sgemm on the same row-major problems: the shapes
// of a small transformer's forward and backward. Best of N after a warm-up.
// Run with OMP_NUM_THREADS=1 for single-thread figures. With --bf16: float32
// against bfloat16 operands (float32 output) on the same problems, the latter
// with operands already converted and with A converted per call (as an
// activation is under autocast; weights are converted once per step).
//   GFLOP/s = 2 M N K / seconds / 1e9
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "core/kernels/bf16.h"
#include "core/kernels/matmul.h"

using namespace ember;

namespace {

struct Problem {
  const char* what;
  int64_t M, N, K;
  bool ta, tb;
  int64_t batch = 1;       // A is [batch, ...] when > 1
  bool b_batched = false;  // B too; otherwise B is 2-D and shared
};

// Best time in seconds of each function over interleaved repetitions (so a
// burst of load from other processes hits all of them alike), after warm-ups.
std::vector<double> best_seconds(const std::vector<std::function<void()>>& fs,
                                 double budget = 1.0) {
  for (const auto& f : fs)
    for (int i = 0; i < 3; ++i) f();
  std::vector<double> best(fs.size(), 1e30);
  double total = 0;
  for (int rep = 0; rep < 300 && (rep < 10 || total < budget); ++rep) {
    for (size_t k = 0; k < fs.size(); ++k) {
      const apps::Stopwatch watch;
      fs[k]();
      const double s = watch.seconds();
      best[k] = std::min(best[k], s);
      total += s;
    }
  }
  return best;
}

// The shapes of a small transformer's forward and backward (and GPT-2's FFN and head).
const std::vector<Problem> kProblems = {
    {"fwd x W", 2048, 768, 256, false, false},
    {"fwd x W^T", 2048, 768, 256, false, true},
    {"dW = dY^T X", 768, 256, 2048, true, false},
    {"dW k/v proj", 64, 256, 2048, true, false},
    {"dW ffn (GPT-2)", 3072, 768, 256, true, false},
    {"dW head (GPT-2)", 50257, 768, 256, true, false},
    {"dX = dY W", 2048, 256, 768, false, false},
    {"dX = dY W^T", 2048, 256, 768, false, true},
    {"proj 2048x256^2", 2048, 256, 256, false, false},
    {"ffn up (GPT-2)", 256, 3072, 768, false, true},
    {"ffn down (GPT-2)", 256, 768, 3072, false, true},
    {"square 1024^3", 1024, 1024, 1024, false, false},
    {"x[8,256,256] W^T", 256, 768, 256, false, true, 8},      // folded into one gemm
    {"att q k^T [32]", 256, 256, 64, false, true, 32, true},  // one 3-D primitive
    {"att P v [32]", 256, 64, 256, false, false, 32, true},
};

void print_header(bool bf16) {
  if (bf16) {
    std::printf(
        "threads: %d   ([batch*]MxNxK; ta tb = transpose flags; GFLOP/s, best of N;\n"
        " f32 = kernels::matmul on float32, bf16 = on bfloat16 operands, +cvt A = bf16 with A converted per call)\n",
        omp_get_max_threads());
    std::printf("%-20s %-16s %3s %3s %10s %10s %10s %8s\n", "problem", "MxNxK", "ta", "tb", "f32", "bf16",
                "+cvt A", "bf16/f32");
  } else {
    std::printf(
      "threads: %d   ([batch*]MxNxK; ta tb = transpose flags; GFLOP/s, best of N;\n"
      " ember = kernels::matmul, ember+= matmul_into with beta = 1, sgemm = dnnl_sgemm)\n",
      omp_get_max_threads());
    std::printf("%-20s %-16s %3s %3s %10s %10s %10s %8s\n", "problem", "MxNxK", "ta", "tb", "ember",
                "ember+=", "sgemm", "ratio");
  }
}

// A problem's random operands a, b and output c (batched as it says), its FLOPs and its label.
struct Operands {
  Tensor a, b, c;
  double flops;
  std::string dims;
};

Operands make_operands(const Problem& p) {
  const Shape sa = p.ta ? Shape{p.K, p.M} : Shape{p.M, p.K};
  const Shape sb = p.tb ? Shape{p.N, p.K} : Shape{p.K, p.N};
  auto batched = [&](Shape s, bool yes) {
    if (yes && p.batch > 1) s.insert(s.begin(), p.batch);
    return s;
  };
  Operands o{Tensor::rand(batched(sa, true), 1, 0, DType::Float32, -1, 1),
             Tensor::rand(batched(sb, p.b_batched), 2, 0, DType::Float32, -1, 1),
             Tensor::zeros(batched({p.M, p.N}, true)), 2.0 * static_cast<double>(p.batch) * p.M * p.N * p.K,
             std::to_string(p.M) + "x" + std::to_string(p.N) + "x" + std::to_string(p.K)};
  if (p.batch > 1) o.dims = std::to_string(p.batch) + "*" + o.dims;
  return o;
}

// float32 against bfloat16 operands (converted before, and A per call); prints the row and
// returns the bf16 / f32 speed ratio.
double bench_bf16(const Problem& p, const Operands& o) {
  const Tensor &a = o.a, &b = o.b;
  const double flops = o.flops;
  const Tensor a16 = kernels::to_bfloat16(a), b16 = kernels::to_bfloat16(b);
  const std::vector<double> t = best_seconds({
      [&] { kernels::matmul(a, b, p.ta, p.tb); },
      [&] { kernels::matmul(a16, b16, p.ta, p.tb); },
      [&] { kernels::matmul(kernels::to_bfloat16(a), b16, p.ta, p.tb); },
  });
  const double ratio = t[0] / t[1];
  std::printf("%-20s %-16s %3d %3d %10.1f %10.1f %10.1f %7.2fx\n", p.what, o.dims.c_str(), p.ta, p.tb,
              flops / t[0] * 1e-9, flops / t[1] * 1e-9, flops / t[2] * 1e-9, ratio);
  return ratio;
}

// kernels::matmul and matmul_into against dnnl_sgemm; prints the row and returns sgemm / ember time.
double bench_f32(const Problem& p, Operands& o) {
  const Tensor &a = o.a, &b = o.b;
  Tensor& c = o.c;
  const double flops = o.flops;
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
  const int64_t lda = p.ta ? p.M : p.K, ldb = p.tb ? p.K : p.N;
  // sgemm: one call over the folded batch when B is shared, else one per batch.
  const bool fold = !p.b_batched && !p.ta;
  const int64_t calls = fold ? 1 : p.batch, m = fold ? p.M * p.batch : p.M;
  const std::vector<double> t = best_seconds({
      [&] { kernels::matmul(a, b, p.ta, p.tb); },
      [&] { kernels::matmul_into(c, a, b, p.ta, p.tb, 1, 1); },
      [&] {
        for (int64_t i = 0; i < calls; ++i) {
          dnnl_sgemm(p.ta ? 'T' : 'N', p.tb ? 'T' : 'N', m, p.N, p.K, 1.0f, pa + i * p.M * p.K,
                     lda, pb + (p.b_batched ? i * p.K * p.N : 0), ldb, 0.0f, pc + i * p.M * p.N,
                     p.N);
        }
      },
  });
  const double t_ember = t[0], t_into = t[1], t_sgemm = t[2];
  const double ratio = t_sgemm / t_ember;
  std::printf("%-20s %-16s %3d %3d %10.1f %10.1f %10.1f %7.0f%%\n", p.what, o.dims.c_str(), p.ta,
              p.tb, flops / t_ember * 1e-9, flops / t_into * 1e-9, flops / t_sgemm * 1e-9,
              100 * ratio);
  return ratio;
}

// The mean and worst ratio over the problems (and with --bf16 the conversion's own speed).
void print_summary(bool bf16, double sum_ratio, double min_ratio, size_t n) {
  if (bf16) {
    std::printf("bf16 / f32 speed: mean %.2fx, min %.2fx\n", sum_ratio / n, min_ratio);
    // The conversion (once per weight per step, once per activation per matmul): bytes read + written.
    const Tensor w = Tensor::rand({3072, 768}, 5, 0, DType::Float32, -1, 1);
    const double t = best_seconds({[&] { kernels::to_bfloat16(w); }})[0];
    std::printf("to_bfloat16 of a 3072x768 weight: %.3f ms, %.1f GB/s\n", t * 1e3,
                static_cast<double>(w.numel()) * 6 / t * 1e-9);
  } else {
    std::printf("ember / sgemm: mean %.0f%%, min %.0f%%\n", 100 * sum_ratio / n, 100 * min_ratio);
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool bf16 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--bf16") {
      bf16 = true;
    } else {
      std::fprintf(stderr, "usage: bench_matmul [--bf16]\n");
      return 2;
    }
  }
  print_header(bf16);
  double sum_ratio = 0, min_ratio = 1e9;
  for (const Problem& p : kProblems) {
    Operands o = make_operands(p);
    const double ratio = bf16 ? bench_bf16(p, o) : bench_f32(p, o);
    sum_ratio += ratio;
    min_ratio = std::min(min_ratio, ratio);
  }
  print_summary(bf16, sum_ratio, min_ratio, kProblems.size());
  return 0;
}
