// The MoE forward pass, built from autograd ops: it gathers the tokens sorted
// by expert into one block, runs every expert over its rows (grouped_linear:
// one matmul per expert and projection), and sums the weighted results back per
// token (gather_weighted_sum); under tensor parallelism the experts' partial outputs are
// summed over the group once per layer.
#include "nn/moe.h"

#include <algorithm>

#include "autograd/ops.h"
#include "autograd/parallel_ops.h"
#include "core/profiler.h"
#include "nn/adapters/lora.h"

namespace ember::nn {

MoE::MoE(int64_t d_model, const MoEConfig& moe, const std::string& act, bool bias,
         Generator& init_gen, double down_std, DType dtype)
    : cfg_(moe) {
  // The router never has a bias (docs/model.md#parameter-names).
  router_ = register_module("gate", std::make_shared<Linear>(d_model, moe.n_experts, false, init_gen, 0.02, dtype));
  auto experts = register_module("experts", std::make_shared<ModuleList>());
  for (int64_t e = 0; e < moe.n_experts; ++e) {
    experts_.push_back(experts->push_back(
        std::make_shared<FFN>(d_model, moe.expert_hidden, act, bias, init_gen, down_std, dtype)));
  }
  if (moe.n_shared > 0) {
    auto shared = register_module("shared_experts", std::make_shared<ModuleList>());
    for (int64_t s = 0; s < moe.n_shared; ++s) {
      shared_.push_back(shared->push_back(
          std::make_shared<FFN>(d_model, moe.expert_hidden, act, bias, init_gen, down_std, dtype)));
    }
  }
}

namespace {

// The Linear computing proj, when it is one or a LoRALinear over one; else null (NF4).
const Linear* linear_base(const UnaryModule& proj) {
  if (const auto* l = dynamic_cast<const Linear*>(&proj)) return l;
  if (const auto* lora = dynamic_cast<const LoRALinear*>(&proj)) return lora->base().get();
  return nullptr;
}

// grouped_linear over the given Linears (weights and biases) for the row groups of sizes.
Variable grouped(const std::vector<const Linear*>& linears, const Variable& in,
                 const std::vector<int64_t>& sizes) {
  std::vector<Variable> w, b;
  for (const Linear* l : linears) {
    w.push_back(l->weight());
    if (l->bias().defined()) b.push_back(l->bias());
  }
  return grouped_linear(in, w, b, sizes);
}

// Each module over its own rows of in (a group of 0 rows skipped), joined in order.
Variable per_expert(const std::vector<const UnaryModule*>& mods, const Variable& in,
                    const std::vector<int64_t>& sizes) {
  std::vector<Variable> pieces;
  int64_t r0 = 0;
  for (size_t e = 0; e < mods.size(); ++e) {
    if (sizes[e] > 0) pieces.push_back(mods[e]->forward(narrow(in, 0, r0, sizes[e])));
    r0 += sizes[e];
  }
  return pieces.size() == 1 ? pieces[0] : cat(pieces, 0);
}

}  // namespace

// One projection of every expert over its rows of in. Plain Linears: one grouped_linear
// (the pretraining path). LoRALinears: the frozen bases (grouped when they are Linears, else
// NF4 pieces per expert) plus (alpha / r) grouped(grouped(dropout(in), A_e), B_e). Anything
// else (NF4 without adapters, a mixture): each expert's module over its rows.
Variable MoE::experts_project(const UnaryModule& (*pick)(const FFN&), const Variable& in) const {
  std::vector<const UnaryModule*> mods;
  std::vector<const Linear*> linears;
  for (const auto& ex : experts_) {
    const UnaryModule& m = pick(*ex);
    mods.push_back(&m);
    if (const auto* l = dynamic_cast<const Linear*>(&m)) linears.push_back(l);
  }
  if (linears.size() == mods.size()) return grouped(linears, in, counts_);  // pretraining
  std::vector<const LoRALinear*> loras;
  std::vector<const Linear*> bases;
  for (const UnaryModule* m : mods) {
    if (const auto* lora = dynamic_cast<const LoRALinear*>(m)) loras.push_back(lora);
    if (const Linear* b = linear_base(*m)) bases.push_back(b);
  }
  if (loras.size() != mods.size()) return per_expert(mods, in, counts_);
  std::vector<const UnaryModule*> base_mods;
  std::vector<Variable> a, b;
  for (const LoRALinear* l : loras) {
    base_mods.push_back(&l->base_module());
    a.push_back(l->lora_A());
    b.push_back(l->lora_B());
  }
  const Variable base = bases.size() == mods.size() ? grouped(bases, in, counts_) : per_expert(base_mods, in, counts_);
  const Variable low = grouped_linear(loras[0]->dropout_input(in), a, {}, counts_);  // [R, r]
  return base + grouped_linear(low, b, {}, counts_) * loras[0]->scale();
}

// r = x Wr^T, p = softmax(r); the top-K p of each token (ties: lower index)
// weight its experts, renormalised to sum 1 when norm_topk_prob.
// aux = E * sum_e f_e P_e with f_e = picks_e / (N K) (no gradient), P_e = mean_n p_ne.
const prof::Family kMoeDispatchFamily = prof::register_family("moe_dispatch", 200);

namespace {

// aux and router_z over the real tokens only: with m_n = 1 for the N_r real tokens, 0 for padding,
//   f_e = (picks of real tokens by e) / (N_r K),  P_e = sum_n m_n p_ne / N_r,
//   aux = E sum_e f_e P_e,  router_z = sum_n m_n lse_n^2 / N_r   (both 0 when N_r = 0).
void real_token_aux(const Tensor& real, const Variable& probs, const Variable& lse,
                    const Tensor& top_idx, MoEAux& aux) {
  const int64_t N = probs.size(0), E = probs.size(1), K = top_idx.size(1);
  EMBER_CHECK(real.numel() == N, "MoE: the real-token mask has ", real.numel(), " values for ", N,
              " tokens");
  const std::vector<float> m = real.contiguous().to(DType::Float32).to_vector<float>();
  double n_real = 0;
  for (const float v : m) n_real += v != 0;
  std::vector<double> f(static_cast<size_t>(E), 0);
  const int64_t* idx = top_idx.data<int64_t>();
  for (int64_t p = 0; p < N * K; ++p) {
    if (m[static_cast<size_t>(p / K)] != 0) f[static_cast<size_t>(idx[p])] += 1;
  }
  for (double& v : f) v /= std::max(n_real * static_cast<double>(K), 1.0);
  const double denom = std::max(n_real, 1.0);
  const Variable f_const(Tensor::from_vector(f).to(probs.dtype()));
  const Variable m_flat(real.contiguous().reshape({N}).to(probs.dtype()));
  const Variable p_sum = sum(probs * reshape(m_flat, {N, 1}), {0});  // [E]
  aux.aux = sum(p_sum * f_const) * (static_cast<double>(E) / denom);
  aux.router_z = sum(lse * lse * m_flat) / denom;
}

}  // namespace

// Picks are sorted by expert (token order within an expert), so each expert's tokens form one
// block of rows: one gather, one matmul per expert and projection (grouped_linear), and one
// weighted gather-sum back per token (slots[n, s]: the row of token n's s-th pick).
MoE::Routing MoE::route(const Variable& xf) const {
  const int64_t N = xf.size(0), E = cfg_.n_experts, K = cfg_.top_k;
  Routing r;
  r.logits = router_->forward(xf);  // [N, E]
  // The profiler counts routing, the gather/scatter of tokens and the aux losses as MoE
  // dispatch (claims); the router and experts stay matmul etc.
  EMBER_PROFILE_CLAIM(kMoeDispatchFamily);
  counts_.assign(E, 0);
  r.probs = softmax(r.logits);
  auto [top_p, picked] = topk(r.probs, K);  // [N, K], int64 [N, K]
  r.top_idx = picked;
  r.weights = cfg_.norm_topk_prob ? top_p / sum(top_p, {-1}, true) : top_p;
  std::vector<std::vector<int64_t>> picks(E);
  const int64_t* idx = r.top_idx.data<int64_t>();
  for (int64_t p = 0; p < N * K; ++p) picks[idx[p]].push_back(p);
  std::vector<int64_t> rows, slot(N * K);
  rows.reserve(N * K);
  for (int64_t e = 0; e < E; ++e) {
    counts_[e] = static_cast<int64_t>(picks[e].size());
    for (const int64_t p : picks[e]) {
      slot[p] = static_cast<int64_t>(rows.size());
      rows.push_back(p / K);
    }
  }
  r.row_idx = Tensor::from_vector(rows);
  r.slots = Tensor::from_vector(slot, {N, K});
  return r;
}

namespace {

// A tensor-parallel expert's down projection: a plain Linear holding this rank's columns.
const Linear& parallel_down_linear(const FFN& ffn) {
  const auto* linear = dynamic_cast<const Linear*>(&ffn.down_proj());
  EMBER_CHECK(linear && !linear->added_rows().defined(),
              "tensor parallelism: the experts' down_proj must be plain Linear layers");
  return *linear;
}

Variable plus(const Variable& a, const Variable& b) { return a.defined() ? a + b : b; }

}  // namespace

// The row-parallel down projections of the routed and shared experts, summed over the group
// once: with h_t this rank's hidden units and W_t its columns of down,
//   y = reduce_from_group(sum_k w_nk h_t W_{e_k,t}^T + sum_s h_{s,t} W_{s,t}^T)
//       + sum_k w_nk b_{e_k} + sum_s b_s.
// The weights enter the partial sum through copy_to_group (their gradient is the sum of the
// ranks' parts); the bias term, the same on every rank, reads them directly. Every expert has
// a bias or none does (the constructor's `bias`); the bias of an expert no token picked stays
// out of the graph (no gradient, as grouped_linear gives it).
Variable MoE::parallel_down(const Variable& hidden, const Variable& xin, const Routing& r) const {
  std::vector<Variable> w, b;
  std::vector<int64_t> bias_row(static_cast<size_t>(r.row_idx.numel()));
  for (size_t e = 0, row = 0; e < experts_.size(); ++e) {
    const Linear& down = parallel_down_linear(*experts_[e]);
    w.push_back(down.weight());
    if (!down.bias().defined() || counts_[e] == 0) continue;
    for (int64_t i = 0; i < counts_[e]; ++i) bias_row[row++] = static_cast<int64_t>(b.size());
    b.push_back(reshape(down.bias(), {1, down.bias().size(0)}));
  }
  const Variable out = grouped_linear(hidden, w, {}, counts_);  // [N K, C], this rank's part
  Variable partial, bias;
  {
    EMBER_PROFILE_CLAIM(kMoeDispatchFamily);
    partial = gather_weighted_sum(out, r.slots, copy_to_group(r.weights, *tp_));  // [N, C]
    if (!b.empty()) {
      const Variable rows = index_select(cat(b, 0), 0, Tensor::from_vector(bias_row));
      bias = gather_weighted_sum(rows, r.slots, r.weights);
    }
  }
  for (const auto& s : shared_) {
    const Variable gate = s->gated() ? s->gate_proj()->forward(xin) : Variable();
    const Linear& down = parallel_down_linear(*s);
    partial = partial + matmul(s->activate(gate, s->up_proj().forward(xin)), down.weight(), false, true);
    if (down.bias().defined()) bias = plus(bias, down.bias());
  }
  const Variable y = reduce_from_group(partial, *tp_);
  return bias.defined() ? y + bias : y;
}

// aux = E * sum_e f_e P_e with f_e = picks_e / (N K) (no gradient), P_e = mean_n p_ne;
// router_z = mean_n lse_n^2 (over the real tokens only when `real` is given).
void MoE::fill_aux(const Routing& r, const Tensor& real, MoEAux& aux) const {
  EMBER_PROFILE_CLAIM(kMoeDispatchFamily);
  const Variable lse = logsumexp(r.logits, {-1});
  if (real.defined()) {
    real_token_aux(real, r.probs, lse, r.top_idx, aux);
    return;
  }
  const int64_t E = cfg_.n_experts, NK = r.row_idx.numel();
  std::vector<double> f(E);
  for (int64_t e = 0; e < E; ++e) f[e] = static_cast<double>(counts_[e]) / static_cast<double>(NK);
  const Variable f_const(Tensor::from_vector(f).to(r.probs.dtype()));
  aux.aux = sum(mean(r.probs, {0}) * f_const) * static_cast<double>(E);
  aux.router_z = mean(lse * lse);
}

// The router reads x itself (whole on every rank: the same routing and aux losses, and the
// same gradient, everywhere); under tensor parallelism the experts read it through
// copy_to_group, their parts of its gradient summed over the group.
Variable MoE::forward(const Variable& x, MoEAux& aux, const Tensor& real) const {
  const Shape in_shape = x.shape();
  const int64_t C = x.size(-1), N = x.numel() / C;
  const Variable xf = reshape(x, {N, C});
  const Routing r = route(xf);
  const Variable xin = tp_ ? copy_to_group(xf, *tp_) : xf;
  Variable xs;
  {
    EMBER_PROFILE_CLAIM(kMoeDispatchFamily);
    xs = index_select(xin, 0, r.row_idx);  // [N K, C], grouped by expert
  }
  const FFN& first = *experts_[0];
  using Pick = const UnaryModule& (*)(const FFN&);
  const Pick gate_of = [](const FFN& f) -> const UnaryModule& { return *f.gate_proj(); };
  const Pick up_of = [](const FFN& f) -> const UnaryModule& { return f.up_proj(); };
  const Pick down_of = [](const FFN& f) -> const UnaryModule& { return f.down_proj(); };
  const Variable gate = first.gated() ? experts_project(gate_of, xs) : Variable();
  const Variable hidden = first.activate(gate, experts_project(up_of, xs));
  Variable y;
  if (tp_) {
    y = parallel_down(hidden, xin, r);
  } else {
    const Variable out = experts_project(down_of, hidden);  // [N K, C]
    {
      EMBER_PROFILE_CLAIM(kMoeDispatchFamily);
      y = gather_weighted_sum(out, r.slots, r.weights);  // [N, C]
    }
    for (const auto& s : shared_) y = y + s->forward(xf);
  }
  fill_aux(r, real, aux);
  return reshape(y, in_shape);
}

}  // namespace ember::nn
