// Every differentiable op, one line each: the table of contents of
// autograd/ops/*.cpp. Each op runs a core kernel and, when grad mode is on
// and an input requires grad, records its backward. Integer tensors (ids,
// indices, masks) are plain Tensors: they are never differentiated.
// Shape letters: B batch, T time, C channels, H heads, V vocab.
#pragma once
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace ember {

namespace kernels {
struct Nf4Tensor;  // core/kernels/nf4.h
}

// --- elementwise, broadcasting (ops/binary.cpp) -------------------------------------------
Variable add(const Variable& a, const Variable& b);      // a + b
Variable sub(const Variable& a, const Variable& b);      // a - b
Variable mul(const Variable& a, const Variable& b);      // a * b
Variable div(const Variable& a, const Variable& b);      // a / b
Variable pow(const Variable& a, const Variable& b);      // a^b (a > 0 where b's grad is needed)
Variable maximum(const Variable& a, const Variable& b);  // ties: grad split evenly
Variable minimum(const Variable& a, const Variable& b);  // ties: grad split evenly
Variable add_scalar(const Variable& a, double s);        // a + s
Variable mul_scalar(const Variable& a, double s);        // a * s
Variable pow_scalar(const Variable& a, double p);        // a^p
Variable rsub_scalar(const Variable& a, double s);       // s - a
Variable clamp(const Variable& a, double lo, double hi); // grad 1 strictly inside, 0 outside

// --- elementwise, unary (ops/unary.cpp) ---------------------------------------------------------
Variable neg(const Variable& a);
Variable exp(const Variable& a);
Variable log(const Variable& a);
Variable sqrt(const Variable& a);
Variable rsqrt(const Variable& a);
Variable tanh(const Variable& a);
Variable sigmoid(const Variable& a);
Variable silu(const Variable& a);
Variable gelu(const Variable& a);       // exact, erf
Variable gelu_tanh(const Variable& a);  // tanh approximation
Variable relu(const Variable& a);
Variable log_sigmoid(const Variable& a);  // -softplus(-a) = min(a, 0) - log1p(e^-|a|); grad sigmoid(-a)
Variable log1mexp(const Variable& a);     // log(1 - e^a), a < 0; grad -1 / expm1(-a)

// --- gated linear units, fused (ops/glu.cpp) ----------------------------------------------------
Variable swiglu(const Variable& gate, const Variable& up);  // silu(gate) * up
Variable geglu(const Variable& gate, const Variable& up);   // gelu(gate) * up, exact GELU

// --- grouped linear, for MoE experts (ops/grouped_linear.cpp) ------------------------------------
// x [R, C] in E consecutive row groups of sizes[e]; y[group e] = x[group e] W_e^T (+ b_e), W_e [O, C].
// biases empty or one per weight. A group of 0 rows gives its weight and bias no gradient.
Variable grouped_linear(const Variable& x, const std::vector<Variable>& weights,
                        const std::vector<Variable>& biases, const std::vector<int64_t>& sizes);
Variable abs(const Variable& a);        // grad sign(a), 0 at 0

// --- reductions (ops/reduce.cpp) ------------------------------------------------------------------
Variable sum(const Variable& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable mean(const Variable& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Variable amax(const Variable& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);  // ties: split
Variable logsumexp(const Variable& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);

// --- softmax over the last dim (ops/softmax.cpp) ----------------------------------------------------
Variable softmax(const Variable& x);
Variable log_softmax(const Variable& x);

// --- matmul (ops/matmul.cpp) ----------------------------------------------------------------------------
// op(a) op(b) over the last two dims, batch dims broadcast (see core/kernels/matmul.h).
// on_b_read (optional) runs in backward once B has been read for the last time, after dA and
// before dB is allocated: whoever holds B may free it there (ZeRO-3's tied head).
Variable matmul(const Variable& a, const Variable& b, bool trans_a = false, bool trans_b = false,
                std::function<void()> on_b_read = nullptr);
// y = x W^T, x [..., C] float32 or float64, W [O, C] in NF4 (ops/nf4_linear.cpp): W not
// differentiable (frozen, QLoRA); tiles of W dequantized to x's dtype inside forward and backward.
Variable nf4_linear(const Variable& x, std::shared_ptr<const kernels::Nf4Tensor> w);

// --- views and joins (ops/shape.cpp); views share storage with their input ----------------------------
Variable view(const Variable& a, const Shape& shape);
Variable reshape(const Variable& a, const Shape& shape);
Variable flatten(const Variable& a);
Variable permute(const Variable& a, const std::vector<int64_t>& dims);
Variable transpose(const Variable& a, int64_t d0, int64_t d1);
Variable narrow(const Variable& a, int64_t dim, int64_t start, int64_t length);
Variable slice(const Variable& a, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Variable select(const Variable& a, int64_t dim, int64_t index);
Variable expand(const Variable& a, const Shape& shape);
Variable squeeze(const Variable& a, int64_t dim);
Variable unsqueeze(const Variable& a, int64_t dim);
Variable contiguous(const Variable& a);
Variable cat(const std::vector<Variable>& xs, int64_t dim);
Variable stack(const std::vector<Variable>& xs, int64_t dim);
std::vector<Variable> split(const Variable& a, int64_t size, int64_t dim);
Variable to_dtype(const Variable& a, DType dtype);  // between float32 and float64

// --- indexing (ops/index.cpp) ------------------------------------------------------------------------------
// weight [V, C], ids [...] (int) -> [..., C]; backward scatter-adds rows.
Variable embedding(const Variable& weight, const Tensor& ids);
Variable index_select(const Variable& a, int64_t dim, const Tensor& index);
Variable index_add(const Variable& base, int64_t dim, const Tensor& index, const Variable& src);
Variable gather(const Variable& a, int64_t dim, const Tensor& index);
Variable scatter_add(const Variable& base, int64_t dim, const Tensor& index, const Variable& src);
// Largest k along the last dim (ties: lower index): differentiable values, int64 indices.
std::pair<Variable, Tensor> topk(const Variable& a, int64_t k);
// out[n] = sum_s weights[n, s] src[slots[n, s]]: src [R, C], slots [N, S] naming distinct
// rows, weights [N, S] -> [N, C] (the MoE combine step; ops/index.cpp).
Variable gather_weighted_sum(const Variable& src, const Tensor& slots, const Variable& weights);

// --- selection (ops/select.cpp) -------------------------------------------------------------------------------
Variable where(const Tensor& cond, const Variable& a, const Variable& b);
Variable masked_fill(const Variable& a, const Tensor& mask, double value);

// --- fused hot-path ops for transformers ------------------------------------------------------
// y = x / sqrt(mean(x^2) + eps) * w over the last dim C; x [..., C], w [C]. Saves x and 1/rms.
Variable rms_norm(const Variable& x, const Variable& w, double eps);
// PyTorch's LayerNorm over the last dim; w, b [C] (b may be undefined). Saves x, mean, 1/std.
Variable layer_norm(const Variable& x, const Variable& w, const Variable& b, double eps);
// Rotary embedding, rotate-half convention, on x [B, T, H, D]: position of row t is
// pos0 + t; cos, sin [>= pos0 + T, D/2] are plain tables (not differentiated).
Variable rope(const Variable& x, const Tensor& cos, const Tensor& sin, int64_t pos0 = 0);
// Causal scaled dot-product attention, q [B, T, Hq, D], k, v [B, S, Hkv, D] (Hkv divides Hq;
// query head j reads kv head j / (Hq / Hkv)); query t sits at position S - T + t and sees key s
// when s <= its position and (window == 0 or position - s < window). scores = q.k * scale,
// softcap c > 0: c * tanh(scores / c), then mask, softmax, weights . v -> [B, T, Hq, D].
// Saves q, k, v, the output and the row logsumexp: memory linear in T.
Variable attention(const Variable& q, const Variable& k, const Variable& v, double scale,
                   int64_t window = 0, double softcap = 0);
// Mean cross-entropy of logits [N, V] against int targets [N], plus z_loss_coef * mean(lse^2)
// (PaLM z-loss), fused: one pass over the logits. The two terms are also returned as numbers.
struct CrossEntropyResult {
  Variable loss;   // ce + z_loss_coef * z, differentiable
  double ce = 0;   // mean cross-entropy
  double z = 0;    // mean logsumexp^2
};
CrossEntropyResult cross_entropy(const Variable& logits, const Tensor& targets,
                                 double z_loss_coef = 0);
// Weighted form (docs/model.md#loss-of-a-step): weight holds N values (e.g. the [B, T] trained
// mask; not differentiated) and norm is the step's trained-token count over all its micro-steps
// and ranks, so summing the micro-batches' gradients gives the large batch's gradient:
//   loss = sum_n w_n (ce_n + z_loss_coef * lse_n^2) / norm,
//   ce = sum_n w_n ce_n / norm,  z = sum_n w_n lse_n^2 / norm.
// Rows with w_n = 0 are skipped (targets unread, gradient 0); an all-zero weight gives loss 0
// whatever norm; norm <= 0 with a non-zero weight is an error.
CrossEntropyResult cross_entropy(const Variable& logits, const Tensor& targets,
                                 const Tensor& weight, double norm, double z_loss_coef = 0);
// Per-row token log-probabilities of logits [N, V] (float32 or float64) at int targets [N],
// weighted by weight [N] (e.g. a 0/1 scored mask; not differentiated), fused as cross_entropy:
//   out_n = w_n log softmax(z_n)[y_n] = w_n (z_n[y_n] - logsumexp(z_n))          -> [N]
//   dz_n  = g_n w_n (onehot(y_n) - softmax(z_n))
// One pass per row; only the row logsumexp is saved (no [N, V] log-softmax). Rows with
// w_n = 0 give 0 (targets unread, gradient 0). docs/model.md#log-probabilities-of-a-side
Variable token_logprobs(const Variable& logits, const Tensor& targets, const Tensor& weight);
// Inverted dropout: zeroes each element with probability p (Philox counter seed, offset + i)
// and scales the rest by 1 / (1 - p).
Variable dropout(const Variable& x, double p, uint64_t seed, uint64_t offset);

// --- operators ------------------------------------------------------------------------------------------------------
inline Variable operator+(const Variable& a, const Variable& b) { return add(a, b); }
inline Variable operator-(const Variable& a, const Variable& b) { return sub(a, b); }
inline Variable operator*(const Variable& a, const Variable& b) { return mul(a, b); }
inline Variable operator/(const Variable& a, const Variable& b) { return div(a, b); }
inline Variable operator-(const Variable& a) { return neg(a); }
inline Variable operator+(const Variable& a, double s) { return add_scalar(a, s); }
inline Variable operator+(double s, const Variable& a) { return add_scalar(a, s); }
inline Variable operator-(const Variable& a, double s) { return add_scalar(a, -s); }
inline Variable operator-(double s, const Variable& a) { return rsub_scalar(a, s); }
inline Variable operator*(const Variable& a, double s) { return mul_scalar(a, s); }
inline Variable operator*(double s, const Variable& a) { return mul_scalar(a, s); }
inline Variable operator/(const Variable& a, double s) { return mul_scalar(a, 1.0 / s); }

}  // namespace ember
