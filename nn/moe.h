// The MoE layer (docs/model.md#mixture-of-experts): router, top-k experts with optional
// renormalisation, shared experts, load-balancing loss and router z-loss; tensor-parallel
// experts (docs/scaling.md#tensor-parallelism). x [..., C] -> [..., C]; N tokens, E experts,
// K = top_k.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/profiler.h"
#include "nn/config.h"
#include "nn/ffn.h"

namespace ember::nn {

// The auxiliary losses of one MoE forward pass.
struct MoEAux {
  Variable aux;       // E * sum_e f_e P_e (1 at perfect balance)
  Variable router_z;  // mean over tokens of logsumexp(router logits)^2
};

// The profiler family of the MoE's own work (routing, top-k, the gather and
// scatter of tokens per expert, aux losses); the router and the experts count
// as matmul etc. nn ranks 200-299 in the report.
extern const prof::Family kMoeDispatchFamily;

class MoE : public Module {
 public:
  MoE(int64_t d_model, const MoEConfig& moe, const std::string& act, bool bias, Generator& init_gen,
      double down_std, DType dtype = DType::Float32);
  // x [..., C] -> [..., C]; fills aux with this pass's losses. real: optional float32 mask of
  // x's tokens (x.numel() / C values, 1 for a real token, 0 for padding): aux and router_z are
  // then taken over the real tokens only (docs/model.md#mixture-of-experts); padding is routed too.
  Variable forward(const Variable& x, MoEAux& aux, const Tensor& real = Tensor()) const;
  // (token, slot) picks of each expert in the last forward pass.
  const std::vector<int64_t>& expert_counts() const { return counts_; }
  // Tensor parallelism (nn/tensor_parallel.h), once every routed and shared expert holds this
  // rank's rows of gate and up and columns of down: the router, whole, routes every token the
  // same on every rank; the experts' input enters through copy_to_group and their partial
  // outputs, combined, are summed over the group once (reduce_from_group), biases after.
  void set_tensor_parallel(const ParallelGroup* group) { tp_ = group && group->size() > 1 ? group : nullptr; }

 private:
  // One forward pass's routing: logits and probs [N, E], the weights [N, K] of the picks
  // top_idx [N, K], the token of each row of the expert-sorted block (row_idx [N K]) and the
  // row of each pick (slots [N, K]). Fills counts_.
  struct Routing {
    Variable logits, probs, weights;
    Tensor top_idx, row_idx, slots;
  };
  Routing route(const Variable& xf) const;
  Variable experts_project(const UnaryModule& (*pick)(const FFN&), const Variable& in) const;
  Variable parallel_down(const Variable& hidden, const Variable& xin, const Routing& r) const;
  void fill_aux(const Routing& r, const Tensor& real, MoEAux& aux) const;
  MoEConfig cfg_;
  const ParallelGroup* tp_ = nullptr;
  std::shared_ptr<Linear> router_;
  std::vector<std::shared_ptr<FFN>> experts_, shared_;
  mutable std::vector<int64_t> counts_;
};

}  // namespace ember::nn
