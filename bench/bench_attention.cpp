// Attention kernel figures: ms and GFLOP/s of the flash kernels
// (core/kernels/attention/attention.h), forward and forward + backward, float32, next
// to the previous row-wise kernel (kept below as the baseline: one query row
// at a time, scalar dot products, libm exp) on the same inputs.
// Best of N interleaved repetitions after a warm-up (the machine is shared).
//   FLOPs: forward 4 D per visible (query, key) pair per head (q.k and P v);
//   forward + backward 3x that (the convention of nn/model_stats; the
//   backward's recomputation of S is not counted).
//   bench_attention [--quick] [--only SHAPE] [--no-old]
// --only runs the shapes whose name starts with SHAPE; --no-old skips the
// row-wise baseline (for profiling the flash kernels alone).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "apps/common/stopwatch.h"
#include "apps/common/matmul_peak.h"
#include "core/kernels/attention/attention.h"

using namespace ember;

namespace {

struct Shape4 {
  const char* what;
  int64_t B, T, Hq, Hkv, D, window;
};

double best_seconds(const std::function<void()>& f, double budget) {
  return apps::best_seconds({.warmup = 1, .min = 3, .max = 200, .budget_seconds = budget}, f);
}

// The previous kernel (row-wise, one [S] score row per thread), forward and backward.
void rowwise_forward(const float* q, const float* k, const float* v, float* out, float* lse,
                     const Shape4& a, float scale) {
  const int64_t G = a.Hq / a.Hkv, T = a.T, D = a.D;
#pragma omp parallel
  {
    std::vector<float> p(T);
#pragma omp for collapse(3) schedule(static)
    for (int64_t b = 0; b < a.B; ++b)
      for (int64_t h = 0; h < a.Hq; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const float* qr = q + ((b * T + t) * a.Hq + h) * D;
          float* o = out + ((b * T + t) * a.Hq + h) * D;
          const int64_t s0 = a.window > 0 ? std::max<int64_t>(0, t - a.window + 1) : 0;
          float m = -std::numeric_limits<float>::infinity(), l = 0;
          for (int64_t s = s0; s <= t; ++s) {
            const float* kr = k + ((b * T + s) * a.Hkv + h / G) * D;
            float dot = 0;
#pragma omp simd reduction(+ : dot)
            for (int64_t d = 0; d < D; ++d) dot += qr[d] * kr[d];
            p[s] = scale * dot;
            m = std::max(m, p[s]);
          }
          for (int64_t s = s0; s <= t; ++s) l += p[s] = std::exp(p[s] - m);
          std::fill(o, o + D, 0.0f);
          for (int64_t s = s0; s <= t; ++s) {
            const float* vr = v + ((b * T + s) * a.Hkv + h / G) * D;
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) o[d] += p[s] / l * vr[d];
          }
          lse[(b * a.Hq + h) * T + t] = m + std::log(l);
        }
  }
}

void rowwise_backward(const float* q, const float* k, const float* v, const float* out,
                      const float* lse, const float* dout, float* dq, float* dk, float* dv,
                      const Shape4& a, float scale) {
  const int64_t G = a.Hq / a.Hkv, T = a.T, D = a.D;
  std::fill(dq, dq + a.B * T * a.Hq * D, 0.0f);
  std::fill(dk, dk + a.B * T * a.Hkv * D, 0.0f);
  std::fill(dv, dv + a.B * T * a.Hkv * D, 0.0f);
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < a.B; ++b)
    for (int64_t g = 0; g < a.Hkv; ++g)
      for (int64_t h = g * G; h < (g + 1) * G; ++h)
        for (int64_t t = 0; t < T; ++t) {
          const int64_t row = ((b * T + t) * a.Hq + h) * D;
          float delta = 0;
          for (int64_t d = 0; d < D; ++d) delta += dout[row + d] * out[row + d];
          const int64_t s0 = a.window > 0 ? std::max<int64_t>(0, t - a.window + 1) : 0;
          for (int64_t s = s0; s <= t; ++s) {
            const int64_t kv = ((b * T + s) * a.Hkv + g) * D;
            float dot = 0, dpv = 0;
#pragma omp simd reduction(+ : dot, dpv)
            for (int64_t d = 0; d < D; ++d) {
              dot += q[row + d] * k[kv + d];
              dpv += dout[row + d] * v[kv + d];
            }
            const float prob = std::exp(scale * dot - lse[(b * a.Hq + h) * T + t]);
            const float ds = prob * (dpv - delta) * scale;
#pragma omp simd
            for (int64_t d = 0; d < D; ++d) {
              dq[row + d] += ds * k[kv + d];
              dk[kv + d] += ds * q[row + d];
              dv[kv + d] += prob * dout[row + d];
            }
          }
        }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, old = true;
  const char* only = "";
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--no-old")) {
      old = false;
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr, "usage: bench_attention [--quick] [--only SHAPE] [--no-old]\n");
      return 2;
    }
  }
  const double budget = quick ? 0.3 : 1.5;
  const std::vector<Shape4> shapes = {
      {"dense-small", 8, 256, 8, 2, 32, 0},
      {"gpt2-small", 4, 64, 12, 12, 64, 0},
      {"long", 1, 2048, 8, 8, 64, 0},
      {"long, window 256", 1, 2048, 8, 8, 64, 256},
  };
  const double peak = apps::measure_peak().flops;
  std::printf("threads %d, float32, matmul peak %.1f GFLOP/s; ms and GFLOP/s, best of N\n",
              omp_get_max_threads(), peak * 1e-9);
  std::printf("%-18s %-22s %9s %8s %9s %8s %6s %10s %10s %7s\n", "shape", "B,T,Hq,Hkv,D", "fwd ms",
              "GFLOP/s", "f+b ms", "GFLOP/s", "%peak", "old fwd", "old f+b", "speedup");
  for (const Shape4& s : shapes) {
    if (std::strncmp(s.what, only, std::strlen(only)) != 0) continue;
    const float scale = 1.0f / std::sqrt(static_cast<float>(s.D));
    const Tensor q = Tensor::randn({s.B, s.T, s.Hq, s.D}, 1),
                 k = Tensor::randn({s.B, s.T, s.Hkv, s.D}, 2),
                 v = Tensor::randn({s.B, s.T, s.Hkv, s.D}, 3), dout = Tensor::randn(q.shape(), 4);
    const kernels::AttentionParams p{scale, s.window, 0};
    double pairs = 0;
    for (int64_t t = 0; t < s.T; ++t)
      pairs += static_cast<double>(s.window > 0 ? std::min(t + 1, s.window) : t + 1);
    const double fwd_flops = 4.0 * s.D * pairs * s.B * s.Hq;
    const double t_fwd = best_seconds([&] { kernels::attention_forward(q, k, v, p); }, budget);
    const double t_fb = best_seconds(
        [&] {
          const kernels::AttentionResult r = kernels::attention_forward(q, k, v, p);
          kernels::attention_backward(q, k, v, r.out, r.lse, dout, p);
        },
        budget);
    Tensor out = Tensor::empty(q.shape()), lse = Tensor::empty({s.B, s.Hq, s.T});
    Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()),
           dv = Tensor::empty(v.shape());
    auto old_fwd = [&] {
      rowwise_forward(q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(),
                      lse.data<float>(), s, scale);
    };
    const double o_fwd = old ? best_seconds(old_fwd, budget / 2) : NAN;
    const double o_fb = !old ? NAN : best_seconds(
        [&] {
          old_fwd();
          rowwise_backward(q.data<float>(), k.data<float>(), v.data<float>(), out.data<float>(),
                           lse.data<float>(), dout.data<float>(), dq.data<float>(),
                           dk.data<float>(), dv.data<float>(), s, scale);
        },
        budget / 2);
    char dims[64];
    std::snprintf(dims, sizeof dims, "%lld,%lld,%lld,%lld,%lld", static_cast<long long>(s.B),
                  static_cast<long long>(s.T), static_cast<long long>(s.Hq),
                  static_cast<long long>(s.Hkv), static_cast<long long>(s.D));
    std::printf("%-18s %-22s %9.2f %8.1f %9.2f %8.1f %5.0f%% %10.2f %10.2f %6.1fx\n", s.what, dims,
                t_fwd * 1e3, fwd_flops / t_fwd * 1e-9, t_fb * 1e3, 3 * fwd_flops / t_fb * 1e-9,
                100 * 3 * fwd_flops / t_fb / peak, o_fwd * 1e3, o_fb * 1e3, o_fb / t_fb);
  }
  return 0;
}
