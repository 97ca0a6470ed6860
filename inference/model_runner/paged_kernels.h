// Row-wise kernels of the paged inference forward (inference/model_runner/paged_forward.cpp):
// norms, RoPE, activations and one-query-at-a-time attention over a block
// table. Each output row depends only on its own input row (and, for
// attention, its own sequence's cached keys in position order), never on the
// batch, so InferenceModel::forward is batch-invariant.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ember::inference::paged {

// rows of x [R, C] in place: RMSNorm x / sqrt(mean(x^2) + eps) * w, or LayerNorm
// (x - mean) / sqrt(var + eps) * w (+ b, when b is not null). Stats in double.
void norm_rows(const std::string& kind, float* x, int64_t R, int64_t C, int64_t ld, const float* w,
               const float* b, double eps, float* out, int64_t ldo);

// Rotate-half RoPE in place on H heads of D in each row r at position pos[r];
// cos, sin [max_seq_len, D/2] (the tables of nn::RotaryEmbedding).
void rope_rows(float* x, int64_t R, int64_t ld, int64_t H, int64_t D, const int64_t* pos,
               const float* cos, const float* sin);

// act(gate, up) -> out, n values: swiglu, geglu (gate used), gelu, gelu_tanh, relu (up only).
void activate(const std::string& act, const float* gate, const float* up, float* out, int64_t n);

// One query row's attention for heads [h0, h1): keys/values of positions [lo, p] of a
// sequence, read through its block table from K, V [n_blocks, 16, Hkv, D] (float32, or
// bfloat16 when bf16: widened exactly, then as float32), head h at kv head h / group. s_t = scale q_h.k_t (softcap c > 0: c tanh(s_t / c)); out_h = sum_t softmax(s)_t v_t.
// q and out hold the row's heads [Hq, D]. Each position's K and V rows are read once for all
// the heads (locality); a head's result is the same whatever [h0, h1) it is computed in.
// scratch holds (h1 - h0) * (p - lo + 1) floats. Softmax in float (core's vector exp).
struct AttnArgs {
  const void* k = nullptr;
  const void* v = nullptr;
  bool bf16 = false;  // k and v hold bfloat16 bits (uint16_t), else float
  int64_t Hkv = 0, D = 0, group = 1;
  double scale = 1, softcap = 0;
};
void attend_row(const AttnArgs& a, const float* q, int64_t h0, int64_t h1,
                const std::vector<int32_t>& blocks, int64_t lo, int64_t p, float* out,
                float* scratch);

}  // namespace ember::inference::paged
