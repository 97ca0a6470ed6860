// AdamW exactly as torch.optim.AdamW (docs/model.md#optimizer), t counting from 1:
//   p *= 1 - lr * wd                       (decoupled decay, first)
//   m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2
//   p -= (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// t is the parameter's own update count (param_step): a parameter without a
// gradient (an idle MoE expert) is skipped, decay included, and not counted.
// One fused loop over all tensors in one OpenMP region; moments are float32 for float32 params.
// bf16 training: a float32 parameter the latest bf16 autocast region rounded (a weight some
// matmul reads, autocast_rounded) gets a bfloat16 copy the update kernel writes as it writes
// the parameter (the same rounding as kernels::to_bfloat16), published to autocast
// (publish_bfloat16_copy): the next step's matmuls read it and convert no weight.
#pragma once
#include "optim/optimizer.h"

namespace ember::optim {

struct AdamWOptions {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
};

// The fused update of one contiguous span of n elements (parameter p, gradient
// g, moments m and v) at the parameter's update count t (from 1), with learning rate lr and weight
// decay wd, gradients read as g * grad_scale: what AdamW::step does for each tensor, exposed so a sharded
// optimizer (dist::ZeroAdamW) updates its slice with the very same arithmetic.
// Defined for float and double.
template <class T>
void adamw_update_span(T* p, const T* g, T* m, T* v, int64_t n, double lr, double wd,
                       const AdamWOptions& options, int64_t t, double grad_scale = 1.0);

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
  ~AdamW() override;
  AdamW(const AdamW&) = delete;
  AdamW& operator=(const AdamW&) = delete;
  void step(double lr, double grad_scale = 1.0) override;
  std::map<std::string, Tensor> state_dict() const override;
  const AdamWOptions& options() const { return options_; }
  // Moments of group g, parameter i.
  const Tensor& exp_avg(size_t g, size_t i) const { return m_[g][i]; }
  const Tensor& exp_avg_sq(size_t g, size_t i) const { return v_[g][i]; }

 private:
  void load_tensors(const StateSource& get) override;
  // Parameter (gi, i)'s bfloat16 copy to refresh in this step, or null (see above).
  uint16_t* bf16_copy(size_t gi, size_t i);

  AdamWOptions options_;
  std::vector<std::vector<Tensor>> m_, v_;
  std::vector<std::vector<Tensor>> p16_;  // bfloat16 copies (undefined where none)
};

}  // namespace ember::optim
