// Prints the effective bandwidth of the elementwise, reduction and softmax
// kernels (GB/s = bytes read + written / seconds), on 1 thread and on all
// threads, next to a memcpy of the same size as a ceiling. Best of N after
// warm-ups. float32 unless noted; 16M-element tensors are far out of cache.
// Usage: bench_elementwise [substring]  (only the kernels whose name has it)
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "apps/common/stopwatch.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/reduce.h"
#include "core/kernels/softmax.h"

using namespace ember;
namespace k = ember::kernels;

namespace {

struct Case {
  std::string what;
  double bytes;  // read + written per call
  double elems;  // output (or input, for reductions) elements per call
  std::function<void()> run;
};

// Best time in seconds of f over repetitions within a budget, after warm-ups.
double best_seconds(const std::function<void()>& f, double budget = 0.4) {
  return apps::best_seconds({.warmup = 2, .min = 5, .max = 200, .budget_seconds = budget}, f);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string only = argc > 1 ? argv[1] : "";  // run only kernels whose name contains it
  const int64_t N = 16 << 20;  // 16M elements
  const double fb = 4.0 * static_cast<double>(N);  // bytes of one 16M float tensor
  const Tensor a = Tensor::rand({N}, 1, 0, DType::Float32, -4, 4);
  const Tensor b = Tensor::rand({N}, 2, 0, DType::Float32, -4, 4);
  const Tensor m2d = a.view({4096, 4096});
  const Tensor bias = Tensor::rand({4096}, 3);
  const Tensor g2d = Tensor::rand({8192, 768}, 6);
  const Tensor ad = a.to(DType::Float64);
  Tensor acc = Tensor::zeros({N});
  Tensor copy_dst = Tensor::empty({N});
  const Tensor sm_small = Tensor::randn({2048, 256}, 4);
  const Tensor sm_big = Tensor::randn({8192, 1024}, 5);
  const Tensor sm_y = k::softmax(sm_big);
  const double smb = 4.0 * 2048 * 256, bigb = 4.0 * 8192 * 1024;
  const double n = static_cast<double>(N);

  std::vector<Case> cases = {
      {"memcpy 16M (ceiling)", 2 * fb, n,
       [&] { std::memcpy(copy_dst.raw_data(), a.raw_data(), a.nbytes()); }},
      {"add 16M + 16M", 3 * fb, n, [&] { k::add(a, b); }},
      {"add [4096,4096] + bias [4096]", 2 * fb, n, [&] { k::add(m2d, bias); }},
      {"mul_scalar 16M", 2 * fb, n, [&] { k::mul_scalar(a, 0.5); }},
      {"add_ in place 16M", 3 * fb, n, [&] { k::add_(acc, b); }},
      {"exp 16M", 2 * fb, n, [&] { k::exp(a); }},
      {"exp 16M float64", 4 * fb, n, [&] { k::exp(ad); }},
      {"sigmoid 16M", 2 * fb, n, [&] { k::sigmoid(a); }},
      {"silu 16M", 2 * fb, n, [&] { k::silu(a); }},
      {"silu_backward 16M", 3 * fb, n, [&] { k::silu_backward(a, b); }},
      {"gelu (erf) 16M", 2 * fb, n, [&] { k::gelu(a); }},
      {"gelu_tanh 16M", 2 * fb, n, [&] { k::gelu_tanh(a); }},
      {"tanh 16M", 2 * fb, n, [&] { k::tanh(a); }},
      {"sum all 16M", fb, n, [&] { k::sum(a); }},
      {"sum [4096,4096] dim 1 (rows)", fb, n, [&] { k::sum(m2d, {1}); }},
      {"sum [4096,4096] dim 0 (cols)", fb, n, [&] { k::sum(m2d, {0}); }},
      {"sum [8192,768] dim 0 (bias grad)", 4.0 * 8192 * 768, 8192.0 * 768,
       [&] { k::sum(g2d, {0}); }},
      {"amax [4096,4096] dim 1", fb, n, [&] { k::amax(m2d, {1}); }},
      {"softmax [2048,256]", 2 * smb, smb / 4, [&] { k::softmax(sm_small); }},
      {"softmax [8192,1024]", 2 * bigb, bigb / 4, [&] { k::softmax(sm_big); }},
      {"log_softmax [8192,1024]", 2 * bigb, bigb / 4, [&] { k::log_softmax(sm_big); }},
      {"softmax_backward [8192,1024]", 3 * bigb, bigb / 4,
       [&] { k::softmax_backward(sm_y, sm_big); }},
  };

  const int all = omp_get_max_threads();
  std::printf("GB/s = bytes read + written / best time; Gel/s = 1e9 elements / s\n");
  std::printf("%-32s %14s %14s   (1 thread | %d threads)\n", "kernel", "1 thr GB/s", "all GB/s",
              all);
  for (const Case& c : cases) {
    if (c.what.find(only) == std::string::npos) continue;
    omp_set_num_threads(1);
    const double t1 = best_seconds(c.run);
    omp_set_num_threads(all);
    const double tn = best_seconds(c.run);
    std::printf("%-32s %7.1f (%4.2f) %7.1f (%4.2f)  Gel/s\n", c.what.c_str(), c.bytes / t1 / 1e9,
                c.elems / t1 / 1e9, c.bytes / tn / 1e9, c.elems / tn / 1e9);
  }
  return 0;
}
