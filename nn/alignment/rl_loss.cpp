// k3, the clipped surrogate of GRPO and PPO, PPO's clipped value loss, their options, the loss of
// a micro-batch over the step's completion-token count and the summed metrics
// (docs/model.md#rl-from-a-reward).
#include "nn/alignment/rl_loss.h"

#include <cmath>

#include "autograd/ops.h"
#include "nn/alignment/token_values.h"

namespace ember::nn {
namespace {

// A micro-batch's tokens in the policy's dtype, read off the mask: the policy's log-probabilities
// and the old and reference ones are 0 off the mask (so nothing there overflows, rho = 1, k3 = 0).
struct Tokens {
  Shape shape;
  DType dtype;
  std::vector<double> mask, old, ref;
  Tensor off;     // 1 off the mask
  Variable logp;  // the policy's, 0 off the mask
  Variable old_v, ref_v;
};

Tokens read_tokens(const char* fn, const PolicyTokens& p, double norm) {
  EMBER_CHECK(p.logp.defined() && p.logp.dim() == 2, fn, ": logp must be [B, T], got ",
              p.logp.defined() ? shape_str(p.logp.shape()) : std::string("none"));
  EMBER_CHECK(norm > 0, fn,
              ": the normaliser (the step's completion-token count) must be > 0, got ", norm);
  Tokens t;
  t.shape = p.logp.shape();
  t.dtype = p.logp.dtype();
  t.mask = token_mask(fn, p.mask, t.shape);
  t.old = token_values(fn, "logp_old", p.logp_old, t.shape);
  t.ref = token_values(fn, "ref", p.ref, t.shape);
  std::vector<double> off(t.mask.size());
  for (size_t i = 0; i < off.size(); ++i) {
    off[i] = 1 - t.mask[i];
    if (t.mask[i] == 0) t.old[i] = t.ref[i] = 0;  // padding may hold anything, even inf
  }
  t.off = tensor_of(off, t.shape, t.dtype);
  t.logp = masked_fill(p.logp, t.off, 0);
  t.old_v = Variable(tensor_of(t.old, t.shape, t.dtype));
  t.ref_v = Variable(tensor_of(t.ref, t.shape, t.dtype));
  return t;
}

// -min(rho A, clip(rho, 1 - eps, 1 + eps) A) per token, the clipped branch taken where it is
// strictly smaller: A > 0 and rho > 1 + eps, or A < 0 and rho < 1 - eps (counted in clipped).
Variable clipped_surrogate(const Tokens& t, const std::vector<double>& adv, double eps,
                           RlMetrics& sums) {
  const Variable rho = exp(t.logp - t.old_v);
  const std::vector<double> r = rho.data().to(DType::Float64).to_vector<double>();
  std::vector<double> clipped(r.size(), 0.0);
  for (size_t i = 0; i < r.size(); ++i) {
    const bool c = (adv[i] > 0 && r[i] > 1 + eps) || (adv[i] < 0 && r[i] < 1 - eps);
    clipped[i] = c && t.mask[i] != 0 ? 1 : 0;
    sums.clipped += clipped[i];
  }
  const Variable a(tensor_of(adv, t.shape, t.dtype));
  return -where(tensor_of(clipped, t.shape, t.dtype), clamp(rho, 1 - eps, 1 + eps) * a, rho * a);
}

// The token count and the kl metric (logp_old - ref) of the micro-batch.
void count_tokens(const Tokens& t, RlMetrics& sums) {
  for (size_t i = 0; i < t.mask.size(); ++i) {
    sums.tokens += t.mask[i];
    sums.kl += t.old[i] - t.ref[i];
  }
}

// 1 where a > b, else 0 (a, b of one shape), in a's dtype.
Tensor greater(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(DType::Float64).to_vector<double>();
  const std::vector<double> y = b.to(DType::Float64).to_vector<double>();
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] > y[i] ? 1 : 0;
  return tensor_of(out, a.shape(), a.dtype());
}

// sum over the completion tokens of per / norm.
RlLossResult finish(const Tokens& t, const Variable& per, double norm, RlMetrics sums) {
  const Variable total = sum(per * Variable(tensor_of(t.mask, t.shape, t.dtype)));
  sums.loss = total.item();
  return {total / norm, sums};
}

}  // namespace

RlAlgo parse_rl_algo(const std::string& name) {
  if (name == "grpo") return RlAlgo::Grpo;
  if (name == "ppo") return RlAlgo::Ppo;
  throw Error("--algo: unknown algorithm \"" + name + "\"; expected grpo or ppo");
}

const char* rl_algo_name(RlAlgo algo) {
  return algo == RlAlgo::Grpo ? "grpo" : "ppo";
}

void check_rl_options(const RlOptions& o) {
  EMBER_CHECK(std::isfinite(o.clip_ratio) && o.clip_ratio > 0 && o.clip_ratio < 1,
              "--clip-ratio must be in (0, 1), got ", o.clip_ratio);
  EMBER_CHECK(std::isfinite(o.kl) && o.kl >= 0, "--kl must be >= 0, got ", o.kl);
  EMBER_CHECK(std::isfinite(o.vf_coef) && o.vf_coef >= 0, "--vf-coef must be >= 0, got ",
              o.vf_coef);
}

Variable k3(const Variable& logp, const Tensor& ref) {
  const Variable d = Variable(ref.to(logp.dtype())) - logp;
  return exp(d) - d - 1.0;
}

RlMetrics& RlMetrics::operator+=(const RlMetrics& o) {
  loss += o.loss;
  value_loss += o.value_loss;
  kl += o.kl;
  clipped += o.clipped;
  tokens += o.tokens;
  has_value = has_value || o.has_value;
  return *this;
}

std::vector<std::pair<std::string, double>> RlMetrics::means() const {
  const double k = tokens > 0 ? 1 / tokens : 0;
  std::vector<std::pair<std::string, double>> m = {
      {"loss", loss * k}, {"kl", kl * k}, {"clip_fraction", clipped * k}};
  if (has_value) m.emplace_back("value_loss", value_loss * k);
  return m;
}

RlLossResult grpo_loss(const PolicyTokens& tokens, const Tensor& advantages,
                       const RlOptions& options, double norm) {
  const Tokens t = read_tokens("grpo_loss", tokens, norm);
  const int64_t B = t.shape[0], T = t.shape[1];
  const std::vector<double> a = token_values("grpo_loss", "advantages", advantages, {B});
  std::vector<double> adv(t.mask.size());
  for (int64_t i = 0; i < B * T; ++i) adv[i] = a[i / T];
  RlMetrics sums;
  count_tokens(t, sums);
  Variable per = clipped_surrogate(t, adv, options.clip_ratio, sums);
  if (options.kl != 0) per = per + k3(t.logp, t.ref_v.data()) * options.kl;
  return finish(t, per, norm, sums);
}

RlLossResult ppo_loss(const PolicyTokens& tokens, const Tensor& advantages,
                      const ValueTokens& values, const RlOptions& options, double norm) {
  const char* fn = "ppo_loss";
  const Tokens t = read_tokens(fn, tokens, norm);
  const std::vector<double> adv = token_values(fn, "advantages", advantages, t.shape);
  EMBER_CHECK(values.values.defined() && values.values.shape() == t.shape, fn, ": values must be ",
              shape_str(t.shape), " like logp, got ",
              values.values.defined() ? shape_str(values.values.shape()) : std::string("none"));
  std::vector<double> v_old = token_values(fn, "values_old", values.values_old, t.shape);
  std::vector<double> ret = token_values(fn, "returns", values.returns, t.shape);
  for (size_t i = 0; i < t.mask.size(); ++i) {
    if (t.mask[i] == 0) v_old[i] = ret[i] = 0;
  }
  Variable v = masked_fill(values.values, t.off, 0);
  if (v.dtype() != t.dtype) v = to_dtype(v, t.dtype);
  const Variable vo(tensor_of(v_old, t.shape, t.dtype)), r(tensor_of(ret, t.shape, t.dtype));
  const Variable vc = vo + clamp(v - vo, -kValueClip, kValueClip);
  const Variable e1 = v - r, e2 = vc - r;
  const Variable l1 = e1 * e1, l2 = e2 * e2;
  const Tensor take_clipped = greater(l2.data(), l1.data());
  const Variable value_loss = where(take_clipped, l2, l1) * 0.5;
  RlMetrics sums;
  sums.has_value = true;
  count_tokens(t, sums);
  sums.value_loss = sum(value_loss * Variable(tensor_of(t.mask, t.shape, t.dtype))).item();
  const Variable per =
      clipped_surrogate(t, adv, options.clip_ratio, sums) + value_loss * options.vf_coef;
  return finish(t, per, norm, sums);
}

}  // namespace ember::nn
