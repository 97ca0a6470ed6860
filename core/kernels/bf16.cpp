// float32 <-> bfloat16 conversion loops (see bf16.h). Integer arithmetic on the
// float's bits with a branch-free NaN select, so the loops vectorize; compiled
// per ISA by EMBER_TARGET_CLONES and split over threads for large tensors
// (it runs once per weight per training step and per matmul activation).
#include "core/kernels/bf16.h"

#include <omp.h>

#include <bit>
#include <cstdint>

#include "core/simd.h"

namespace ember::kernels {
namespace {

EMBER_TARGET_CLONES void narrow_block(const float* __restrict in, uint16_t* __restrict out,
                                      int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bfloat16_bits(in[i]);
}

EMBER_TARGET_CLONES void widen_block(const uint16_t* __restrict in, float* __restrict out,
                                     int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::bit_cast<float>(static_cast<uint32_t>(in[i]) << 16);
}

// Runs block(begin, count) over [0, n) in contiguous per-thread ranges; serial
// below 256 Ki elements, where a fork-join costs about what it saves.
template <class F>
void split(int64_t n, F&& block) {
#pragma omp parallel if (n >= (int64_t{1} << 18) && !omp_in_parallel())
  {
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t i0 = n * t / threads, i1 = n * (t + 1) / threads;
    block(i0, i1 - i0);
  }
}

}  // namespace

Tensor to_bfloat16(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dtype() == DType::Float32, "to_bfloat16: expected a float32 tensor, got ",
              x.defined() ? dtype_name(x.dtype()) : "an undefined one");
  const Tensor src = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), DType::BFloat16);
  const float* in = src.data<float>();
  uint16_t* o = static_cast<uint16_t*>(out.raw_data());
  split(x.numel(), [&](int64_t i0, int64_t n) { narrow_block(in + i0, o + i0, n); });
  return out;
}

Tensor bfloat16_to_float32(const Tensor& x) {
  EMBER_CHECK(x.defined() && x.dtype() == DType::BFloat16,
              "bfloat16_to_float32: expected a bfloat16 tensor, got ",
              x.defined() ? dtype_name(x.dtype()) : "an undefined one");
  EMBER_CHECK(x.is_contiguous(), "bfloat16_to_float32: expected a contiguous tensor");
  Tensor out = Tensor::empty(x.shape(), DType::Float32);
  const uint16_t* in = static_cast<const uint16_t*>(x.raw_data());
  float* o = out.data<float>();
  split(x.numel(), [&](int64_t i0, int64_t n) { widen_block(in + i0, o + i0, n); });
  return out;
}

}  // namespace ember::kernels
