// Prints GFLOP/s (and GB/s of W streamed) of kernels::matmul_rows, the
// batch-invariant y = x W^T of inference, for M = 1, 4, 16, 64 (decode) and 256 (prefill) rows on GPT-2
// small's shapes (K = 768; N = 768, 2304, 3072, 50257; and the FFN down
// projection K = 3072, N = 768), next to kernels::gemv_rows (M = 1 only: the
// memory-bound floor) and kernels::matmul (oneDNN, not batch-invariant).
// Best of N after a warm-up; OMP_NUM_THREADS sets the threads.
//   GFLOP/s = 2 M N K / seconds / 1e9
#include <omp.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "core/kernels/gemv.h"
#include "core/kernels/matmul.h"
#include "core/kernels/matmul_rows.h"
#include "core/tensor.h"

using namespace ember;

namespace {

double best_seconds(const std::function<void()>& f, double budget = 0.4) {
  for (int i = 0; i < 2; ++i) f();
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 200 && (rep < 5 || total < budget); ++rep) {
    const apps::Stopwatch watch;
    f();
    const double s = watch.seconds();
    best = std::min(best, s);
    total += s;
  }
  return best;
}

}  // namespace

int main() {
  struct Shape2 {
    const char* what;
    int64_t N, K;
  };
  const std::vector<Shape2> shapes = {{"attn o_proj", 768, 768},  {"attn qkv", 2304, 768},
                                      {"ffn up", 3072, 768},      {"ffn down", 768, 3072},
                                      {"lm head", 50257, 768}};
  std::printf("threads %d\n", omp_get_max_threads());
  std::printf("%-12s %6s %6s %4s %12s %10s %12s %12s\n", "shape", "N", "K", "M", "rows GFLOP/s",
              "W GB/s", "gemv GFLOP/s", "dnnl GFLOP/s");
  for (const auto& s : shapes) {
    const Tensor w = Tensor::randn({s.N, s.K}, 1);
    for (const int64_t M : {1, 4, 16, 64, 256}) {
      const Tensor x = Tensor::randn({M, s.K}, 2);
      Tensor y = Tensor::empty({M, s.N});
      const double flops = 2.0 * static_cast<double>(M * s.N * s.K);
      const double t_rows = best_seconds([&] {
        kernels::matmul_rows(M, s.N, s.K, x.data<float>(), s.K, w.data<float>(), s.K, nullptr,
                             y.data<float>(), s.N);
      });
      double t_gemv = 0;
      if (M == 1) {
        t_gemv = best_seconds([&] {
          kernels::gemv_rows(s.N, s.K, x.data<float>(), w.data<float>(), s.K, y.data<float>(), 1);
        });
      }
      const double t_dnnl = best_seconds([&] { (void)kernels::matmul(x, w, false, true); });
      std::printf("%-12s %6lld %6lld %4lld %12.1f %10.1f %12s %12.1f\n", s.what,
                  static_cast<long long>(s.N), static_cast<long long>(s.K),
                  static_cast<long long>(M), flops / t_rows / 1e9,
                  4.0 * static_cast<double>(s.N * s.K) / t_rows / 1e9,
                  M == 1 ? std::to_string(flops / t_gemv / 1e9).substr(0, 6).c_str() : "-",
                  flops / t_dnnl / 1e9);
    }
  }
  return 0;
}
