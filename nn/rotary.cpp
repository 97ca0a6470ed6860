// Rotary and sinusoidal position tables.
#include "nn/rotary.h"

#include <cmath>

#include "autograd/ops.h"

namespace ember::nn {

RotaryEmbedding::RotaryEmbedding(int64_t head_dim, int64_t max_seq_len, double theta, DType dtype) {
  EMBER_CHECK(head_dim % 2 == 0, "RotaryEmbedding: head_dim must be even, got ", head_dim);
  const int64_t h = head_dim / 2;
  Tensor c = Tensor::empty({max_seq_len, h}, DType::Float64);
  Tensor s = Tensor::empty({max_seq_len, h}, DType::Float64);
  double* cp = c.data<double>();
  double* sp = s.data<double>();
  for (int64_t p = 0; p < max_seq_len; ++p) {
    for (int64_t i = 0; i < h; ++i) {
      const double inv_freq = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      const double angle = static_cast<double>(p) * inv_freq;
      cp[p * h + i] = std::cos(angle);
      sp[p * h + i] = std::sin(angle);
    }
  }
  cos_ = c.to(dtype);
  sin_ = s.to(dtype);
}

Variable RotaryEmbedding::apply(const Variable& x, int64_t pos0) const {
  return rope(x, cos_, sin_, pos0);
}

Tensor sinusoidal_positions(int64_t max_seq_len, int64_t d, DType dtype) {
  EMBER_CHECK(d % 2 == 0, "sinusoidal positions need an even width, got ", d);
  Tensor pe = Tensor::empty({max_seq_len, d}, DType::Float64);
  double* p = pe.data<double>();
  for (int64_t pos = 0; pos < max_seq_len; ++pos) {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle = static_cast<double>(pos) / std::pow(10000.0, 2.0 * static_cast<double>(i) / static_cast<double>(d));
      p[pos * d + 2 * i] = std::sin(angle);
      p[pos * d + 2 * i + 1] = std::cos(angle);
    }
  }
  return pe.to(dtype);
}

}  // namespace ember::nn
