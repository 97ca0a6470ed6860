// AdamW update: one vectorised pass over p, g, m, v, all parameter tensors in
// one OpenMP region.
#include "optim/adamw.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "autograd/grad_mode.h"
#include "core/simd.h"
#include "core/threads.h"

namespace ember::optim {

namespace {

// Per-step constants of the update, in the parameter's type.
template <class T>
struct AdamWScalars {
  T decay, step, sqrt_bc2, b1, b2, one_minus_b1, one_minus_b2, eps, grad_scale;
};

template <class T>
AdamWScalars<T> adamw_scalars(double lr, double wd, const AdamWOptions& o, int64_t t, double grad_scale) {
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
  return {static_cast<T>(1.0 - lr * wd), static_cast<T>(lr / bc1), static_cast<T>(std::sqrt(bc2)),
          static_cast<T>(o.beta1),       static_cast<T>(o.beta2),  static_cast<T>(1.0 - o.beta1),
          static_cast<T>(1.0 - o.beta2), static_cast<T>(o.eps),  static_cast<T>(grad_scale)};
}

// The update of n elements, one thread; vectorised (no branches, sqrt without errno).
template <class T>
EMBER_TARGET_CLONES void adamw_kernel(T* __restrict p, const T* __restrict g, T* __restrict m,
                                      T* __restrict v, int64_t n, const AdamWScalars<T> s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T gi = g[i] * s.grad_scale;  // exact when grad_scale is 1
    const T mi = s.b1 * m[i] + s.one_minus_b1 * gi;
    const T vi = s.b2 * v[i] + s.one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * s.decay - s.step * mi / (std::sqrt(vi) / s.sqrt_bc2 + s.eps);
  }
}

// One tensor's share of an update: where its elements sit and its constants.
template <class T>
struct AdamWSpan {
  T *p, *m, *v;
  const T* g;
  int64_t n;
  AdamWScalars<T> s;
};

// Runs every span's update in one OpenMP region, the concatenated elements
// split evenly between threads (small tensors no longer run alone).
template <class T>
void adamw_run(const std::vector<AdamWSpan<T>>& spans) {
  int64_t total = 0;
  for (const auto& sp : spans) total += sp.n;
#pragma omp parallel if (total > kParallelGrain)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t chunk = ((total + nt - 1) / nt + 15) / 16 * 16;
    const int64_t lo = std::min(total, t * chunk), hi = std::min(total, lo + chunk);
    int64_t base = 0;
    for (const auto& sp : spans) {
      const int64_t b = std::max(lo, base), e = std::min(hi, base + sp.n);
      if (b < e) {
        const int64_t o = b - base;
        adamw_kernel<T>(sp.p + o, sp.g + o, sp.m + o, sp.v + o, e - b, sp.s);
      }
      base += sp.n;
    }
  }
}

}  // namespace

template <class T>
void adamw_update_span(T* p, const T* g, T* m, T* v, int64_t n, double lr, double wd,
                       const AdamWOptions& options, int64_t t, double grad_scale) {
  adamw_run<T>({{p, m, v, g, n, adamw_scalars<T>(lr, wd, options, t, grad_scale)}});
}

template void adamw_update_span<float>(float*, const float*, float*, float*, int64_t, double,
                                       double, const AdamWOptions&, int64_t, double);
template void adamw_update_span<double>(double*, const double*, double*, double*, int64_t, double,
                                        double, const AdamWOptions&, int64_t, double);

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

void AdamW::step(double lr, double grad_scale) {
  EMBER_PROFILE_SCOPE(kOptimizerFamily);
  ++step_;
  NoGradGuard no_grad;
  std::vector<AdamWSpan<float>> f32;
  std::vector<AdamWSpan<double>> f64;
  std::vector<Tensor> keep;  // contiguous copies of strided gradients, alive until the update ran
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    const double glr = lr * group.lr_scale;
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Variable& p = group.params[i];
      if (!p.grad().defined()) continue;  // as PyTorch: no grad, no update, not counted
      const int64_t t = ++param_step_[gi][i];
      const Tensor& data = p.data();
      keep.push_back(p.grad().contiguous());
      const Tensor& grad = keep.back();
      dispatch_float(data.dtype(), "AdamW", [&](auto tag) {
        using T = decltype(tag);
        AdamWSpan<T> span{data.data<T>(),  m_[gi][i].data<T>(), v_[gi][i].data<T>(), grad.data<T>(),
                          data.numel(), adamw_scalars<T>(glr, group.weight_decay, options_, t, grad_scale)};
        if constexpr (std::is_same_v<T, float>) {
          f32.push_back(span);
        } else {
          f64.push_back(span);
        }
      });
      data.bump_version();
    }
  }
  adamw_run(f32);
  adamw_run(f64);
}

std::map<std::string, Tensor> AdamW::state_dict() const {
  std::map<std::string, Tensor> out;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const std::string key = param_key(gi, i);
      out[key + "/exp_avg"] = m_[gi][i];
      out[key + "/exp_avg_sq"] = v_[gi][i];
    }
  }
  return out;
}

void AdamW::load_tensors(const StateSource& get) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const std::string key = param_key(gi, i);
      for (auto [suffix, dst] : {std::pair{"/exp_avg", &m_[gi][i]}, std::pair{"/exp_avg_sq", &v_[gi][i]}}) {
        const Tensor t = get(key + suffix);
        EMBER_CHECK(t.defined(), "AdamW state: missing ", key, suffix);
        EMBER_CHECK(t.shape() == dst->shape(), "AdamW state: ", key, suffix, " has shape ",
                    shape_str(t.shape()), " but the parameter has shape ", shape_str(dst->shape()));
        dst->copy_(t);
      }
    }
  }
}

}  // namespace ember::optim
