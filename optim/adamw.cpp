// AdamW update: one pass over p, g, m, v per parameter tensor.
#include "optim/adamw.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/profiler.h"

namespace ember::optim {

template <class T>
void adamw_update_span(T* p, const T* g, T* m, T* v, int64_t n, double lr, double wd,
                       const AdamWOptions& options, int64_t t) {
  const double b1 = options.beta1, b2 = options.beta2, eps = options.eps;
  const double bc1 = 1.0 - std::pow(b1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(b2, static_cast<double>(t));
  const T decay = static_cast<T>(1.0 - lr * wd);
  const T step = static_cast<T>(lr / bc1);
  const T sqrt_bc2 = static_cast<T>(std::sqrt(bc2));
  const T tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2), te = static_cast<T>(eps);
  const T ob1 = static_cast<T>(1.0 - b1), ob2 = static_cast<T>(1.0 - b2);
#pragma omp parallel for simd if (n > 32768)
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i];
    const T mi = tb1 * m[i] + ob1 * gi;
    const T vi = tb2 * v[i] + ob2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step * mi / (std::sqrt(vi) / sqrt_bc2 + te);
  }
}

template void adamw_update_span<float>(float*, const float*, float*, float*, int64_t, double,
                                       double, const AdamWOptions&, int64_t);
template void adamw_update_span<double>(double*, const double*, double*, double*, int64_t, double,
                                        double, const AdamWOptions&, int64_t);

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer(std::move(groups)), options_(options) {
  for (const auto& g : groups_) {
    m_.emplace_back();
    v_.emplace_back();
    for (const auto& p : g.params) {
      EMBER_CHECK(p.data().is_contiguous(), "AdamW: parameter data must be contiguous");
      m_.back().push_back(Tensor::zeros(p.shape(), p.dtype()));
      v_.back().push_back(Tensor::zeros(p.shape(), p.dtype()));
    }
  }
}

void AdamW::step(double lr) {
  EMBER_PROFILE_SCOPE(prof::Family::Optimizer);
  ++step_;
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    const double glr = lr * group.lr_scale;
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Variable& p = group.params[i];
      if (!p.grad().defined()) continue;  // as PyTorch: no grad, no update (state untouched)
      const Tensor data = p.data();
      const Tensor grad = p.grad().contiguous();
      dispatch_float(data.dtype(), "AdamW", [&](auto tag) {
        using T = decltype(tag);
        adamw_update_span<T>(data.data<T>(), grad.data<T>(), m_[gi][i].data<T>(),
                             v_[gi][i].data<T>(), data.numel(), glr, group.weight_decay, options_,
                             step_);
      });
      data.bump_version();
    }
  }
}

static std::string param_key(const ParamGroup& g, size_t i, size_t gi) {
  return g.names[i].empty() ? "group" + std::to_string(gi) + "." + std::to_string(i) : g.names[i];
}

std::map<std::string, Tensor> AdamW::state_dict() const {
  std::map<std::string, Tensor> out;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const std::string key = param_key(groups_[gi], i, gi);
      out[key + "/exp_avg"] = m_[gi][i];
      out[key + "/exp_avg_sq"] = v_[gi][i];
    }
  }
  return out;
}

void AdamW::load_state_dict(const std::map<std::string, Tensor>& state, int64_t step) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const std::string key = param_key(groups_[gi], i, gi);
      for (auto [suffix, dst] : {std::pair{"/exp_avg", &m_[gi][i]}, std::pair{"/exp_avg_sq", &v_[gi][i]}}) {
        auto it = state.find(key + suffix);
        EMBER_CHECK(it != state.end(), "AdamW state: missing ", key, suffix);
        EMBER_CHECK(it->second.shape() == dst->shape(), "AdamW state: ", key, suffix, " has shape ",
                    shape_str(it->second.shape()), " but the parameter has shape ",
                    shape_str(dst->shape()));
        dst->copy_(it->second);
      }
    }
  }
  step_ = step;
}

}  // namespace ember::optim
