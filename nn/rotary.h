// RotaryEmbedding: cos/sin tables [max_seq_len, head_dim / 2] for
// inv_freq_i = theta^(-2i / head_dim), angle = p * inv_freq_i (computed in
// double), cached once; apply() rotates q or k [B, T, H, D] at positions pos0.. .
#pragma once
#include "autograd/variable.h"
#include "core/tensor.h"

namespace ember::nn {

class RotaryEmbedding {
 public:
  RotaryEmbedding(int64_t head_dim, int64_t max_seq_len, double theta, DType dtype = DType::Float32);
  Variable apply(const Variable& x, int64_t pos0 = 0) const;
  const Tensor& cos() const { return cos_; }
  const Tensor& sin() const { return sin_; }

 private:
  Tensor cos_, sin_;
};

// PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same): [max_seq_len, d].
Tensor sinusoidal_positions(int64_t max_seq_len, int64_t d, DType dtype = DType::Float32);

}  // namespace ember::nn
