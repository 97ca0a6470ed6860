// Feed-forward networks (docs/model.md#feed-forward): swiglu down(silu(gate(x)) * up(x)),
// geglu the same with exact GELU, gelu / gelu_tanh / relu down(act(up(x))).
// x [..., C] -> [..., C]. The MoE layer built of them is nn/moe.h.
#pragma once
#include <memory>
#include <string>

#include "autograd/parallel_group.h"
#include "nn/layers.h"

namespace ember::nn {

class FFN : public UnaryModule {
 public:
  FFN(int64_t d_model, int64_t hidden, const std::string& act, bool bias, Generator& init_gen,
      double down_std, DType dtype = DType::Float32);
  Variable forward(const Variable& x) const override;
  // The hidden activation from the gate and up projections (gate unused by
  // gelu, gelu_tanh and relu): what forward applies between up and down.
  Variable activate(const Variable& gate, const Variable& up) const;
  bool gated() const { return gate_proj_ != nullptr; }
  // Each a Linear, or a LoRALinear / Nf4Linear once fine-tuning replaced it.
  const UnaryModule* gate_proj() const { return gate_proj_.get(); }
  const UnaryModule& up_proj() const { return *up_proj_; }
  const UnaryModule& down_proj() const { return *down_proj_; }
  // Tensor parallelism (nn/tensor_parallel.h), once gate and up hold this rank's rows and
  // down its columns: the input copied to the group, down_proj row-parallel.
  void set_tensor_parallel(const ParallelGroup* group) { tp_ = group && group->size() > 1 ? group : nullptr; }

 private:
  std::string act_;
  const ParallelGroup* tp_ = nullptr;
  std::shared_ptr<UnaryModule> gate_proj_, up_proj_, down_proj_;
};

}  // namespace ember::nn
