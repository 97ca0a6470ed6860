// NF4 quantization, double quantization of the absmaxes and dequantization
// (formats in nf4.h): code(w) = nearest code to w / absmax, w' = code * absmax.
#include "core/kernels/nf4.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/threads.h"

namespace ember::kernels {

const std::array<float, 16> kNf4Codes = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

uint8_t nf4_nearest_code(double v) {
  // The code index is the number of midpoints strictly below v: a tie goes to the lower code.
  uint8_t index = 0;
  for (size_t k = 0; k + 1 < kNf4Codes.size(); ++k) {
    const double midpoint = (double(kNf4Codes[k]) + double(kNf4Codes[k + 1])) / 2;
    if (v > midpoint) index = static_cast<uint8_t>(k + 1);
  }
  return index;
}

float Nf4Tensor::block_absmax(int64_t block) const {
  if (!double_quant()) return absmax[block];
  return float(absmax_q[block]) * absmax_scale[block / kNf4DqBlock] + absmax_mean;
}

int64_t Nf4Tensor::nbytes() const {
  const int64_t n_absmax = num_blocks();
  const int64_t absmax_bytes =
      double_quant() ? n_absmax + 4 * static_cast<int64_t>(absmax_scale.size()) + 4 : 4 * n_absmax;
  return static_cast<int64_t>(codes.size()) + absmax_bytes;
}

namespace {

// nf4-dq: m = mean(a); per 256: scale = max|a - m| / 127, q = round((a - m) / scale).
void double_quantize(Nf4Tensor& q, const std::vector<float>& absmax) {
  const int64_t n = static_cast<int64_t>(absmax.size());
  double total = 0;
  for (float a : absmax) total += a;
  q.absmax_mean = n > 0 ? float(total / double(n)) : 0.0f;
  q.absmax_q.assign(n, 0);
  for (int64_t b0 = 0; b0 < n; b0 += kNf4DqBlock) {
    const int64_t b1 = std::min(n, b0 + kNf4DqBlock);
    double max_c = 0;
    for (int64_t b = b0; b < b1; ++b)
      max_c = std::max(max_c, std::abs(double(absmax[b]) - q.absmax_mean));
    const float scale = float(max_c / 127);
    q.absmax_scale.push_back(scale);
    if (scale == 0) continue;  // every c is 0: q stays 0
    for (int64_t b = b0; b < b1; ++b) {
      const double c = double(absmax[b]) - q.absmax_mean;
      q.absmax_q[b] = static_cast<int8_t>(std::clamp(std::lround(c / scale), -127L, 127L));
    }
  }
}

}  // namespace

Nf4Tensor nf4_quantize(const Tensor& w, bool double_quant) {
  EMBER_CHECK(w.dtype() == DType::Float32, "nf4_quantize: expected a float32 tensor, got ",
              dtype_name(w.dtype()));
  const Tensor flat = w.contiguous();
  const float* x = flat.data<float>();
  Nf4Tensor q;
  q.shape = w.shape();
  const int64_t n = q.numel(), blocks = q.num_blocks();
  q.codes.assign((n + 1) / 2, 0);
  std::vector<float> absmax(blocks);
#pragma omp parallel for schedule(static) if (n > kParallelGrain && !omp_in_parallel())
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t i0 = b * kNf4Block, i1 = std::min(n, i0 + kNf4Block);
    float a = 0;
    for (int64_t i = i0; i < i1; ++i) a = std::max(a, std::abs(x[i]));
    absmax[b] = a;
    for (int64_t i = i0; i < i1; ++i) {
      const uint8_t c = a == 0 ? 7 : nf4_nearest_code(double(x[i]) / double(a));
      // Blocks are 64 elements, so a byte never straddles two blocks (two threads).
      q.codes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? c << 4 : c);
    }
  }
  if (double_quant) {
    double_quantize(q, absmax);
  } else {
    q.absmax = std::move(absmax);
  }
  return q;
}

template <class T>
void nf4_dequantize_range(const Nf4Tensor& q, int64_t begin, int64_t count, T* out) {
  EMBER_CHECK(begin >= 0 && count >= 0 && begin + count <= q.numel(), "nf4_dequantize_range: [",
              begin, ", ", begin + count, ") outside a tensor of ", q.numel(), " elements");
  const int64_t bs = q.block, b_first = begin / bs, b_last = (begin + count + bs - 1) / bs;
#pragma omp parallel for schedule(static) if (count > kParallelGrain && !omp_in_parallel())
  for (int64_t b = b_first; b < b_last; ++b) {
    const T a = static_cast<T>(q.block_absmax(b));
    const int64_t i0 = std::max(begin, b * bs);
    const int64_t i1 = std::min(begin + count, (b + 1) * bs);
    for (int64_t i = i0; i < i1; ++i) out[i - begin] = static_cast<T>(kNf4Codes[q.code(i)]) * a;
  }
}

template void nf4_dequantize_range<float>(const Nf4Tensor&, int64_t, int64_t, float*);
template void nf4_dequantize_range<double>(const Nf4Tensor&, int64_t, int64_t, double*);

namespace {

// The shard of `whole` whose element j is whole's element at(j), blocks of `block` elements,
// the shard's block b taking the absmax of whole's block absmax_of(b).
template <class At, class Block>
Nf4Tensor nf4_cut(const Nf4Tensor& whole, Shape shape, int64_t block, At at, Block absmax_of) {
  Nf4Tensor s;
  s.shape = std::move(shape);
  s.block = block;
  const int64_t n = s.numel();
  s.codes.assign((n + 1) / 2, 0);
  for (int64_t j = 0; j < n; ++j) {
    const uint8_t c = whole.code(at(j));
    s.codes[j / 2] |= static_cast<uint8_t>(j % 2 == 0 ? c << 4 : c);
  }
  s.absmax.resize(s.num_blocks());
  for (int64_t b = 0; b < s.num_blocks(); ++b) s.absmax[b] = whole.block_absmax(absmax_of(b));
  return s;
}

void check_cut(const Nf4Tensor& whole, bool ok, const std::string& what, const char* dim,
               int64_t first, int64_t count) {
  EMBER_CHECK(whole.shape.size() == 2 && whole.block == kNf4Block, what,
              ": only a whole 2-D NF4 tensor is cut into shards");
  EMBER_CHECK(first >= 0 && count >= 1, what, ": ", dim, " [", first, ", ", first + count, ")");
  EMBER_CHECK(ok, what, ": the NF4 blocks of ", kNf4Block, " elements of ", shape_str(whole.shape),
              " do not align with its ", dim, " [", first, ", ", first + count,
              "), so the shard cannot keep the one-process quantization");
}

}  // namespace

Nf4Tensor nf4_rows(const Nf4Tensor& whole, int64_t first, int64_t count, const std::string& what) {
  const int64_t in = whole.shape.size() == 2 ? whole.shape[1] : 0;
  const bool ok = first + count <= (whole.shape.empty() ? 0 : whole.shape[0]) &&
                  first * in % kNf4Block == 0 && count * in % kNf4Block == 0;
  check_cut(whole, ok, what, "rows", first, count);
  const int64_t begin = first * in, b0 = begin / kNf4Block;
  return nf4_cut(whole, {count, in}, kNf4Block, [&](int64_t j) { return begin + j; },
                 [&](int64_t b) { return b0 + b; });
}

Nf4Tensor nf4_columns(const Nf4Tensor& whole, int64_t first, int64_t count, const std::string& what) {
  const int64_t in = whole.shape.size() == 2 ? whole.shape[1] : 0;
  const bool rows_in_blocks = in > 0 && kNf4Block % in == 0;  // a block: 64 / in whole rows
  const bool blocks_in_rows = in > 0 && in % kNf4Block == 0 && first % kNf4Block == 0 &&
                              count % kNf4Block == 0;
  check_cut(whole, first + count <= in && (rows_in_blocks || blocks_in_rows), what, "columns",
            first, count);
  auto at = [&](int64_t j) { return j / count * in + first + j % count; };
  if (rows_in_blocks)  // block b of the shard: the shard's part of whole block b
    return nf4_cut(whole, {whole.shape[0], count}, kNf4Block / in * count, at, [](int64_t b) { return b; });
  const int64_t per_row = count / kNf4Block;  // whole blocks of each row's part
  return nf4_cut(whole, {whole.shape[0], count}, kNf4Block, at, [&](int64_t b) {
    return (b / per_row * in + first) / kNf4Block + b % per_row;
  });
}

Tensor nf4_dequantize(const Nf4Tensor& q, DType dtype) {
  Tensor out = Tensor::empty(q.shape, dtype);
  dispatch_float(dtype, "nf4_dequantize", [&](auto tag) {
    using T = decltype(tag);
    nf4_dequantize_range<T>(q, 0, q.numel(), out.data<T>());
  });
  return out;
}

}  // namespace ember::kernels
