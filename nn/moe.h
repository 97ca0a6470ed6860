// The MoE layer (docs/model.md#mixture-of-experts): router, top-k experts with optional
// renormalisation, shared experts, load-balancing loss and router z-loss.
// x [..., C] -> [..., C]; N tokens, E experts, K = top_k.
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

 private:
  Variable experts_project(const UnaryModule& (*pick)(const FFN&), const Variable& in) const;
  MoEConfig cfg_;
  std::shared_ptr<Linear> router_;
  std::vector<std::shared_ptr<FFN>> experts_, shared_;
  mutable std::vector<int64_t> counts_;
};

}  // namespace ember::nn
