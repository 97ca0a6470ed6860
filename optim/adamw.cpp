// AdamW update: one vectorised pass over p, g, m, v, all parameter tensors in
// one OpenMP region; under bf16 training it also writes each weight's bfloat16
// copy (see adamw.h).
#include "optim/adamw.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "core/kernels/bf16.h"
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

// adamw_kernel's update, also writing each new p rounded to bfloat16 into p16
// (kernels::bfloat16_bits: what to_bfloat16 would make of it).
EMBER_TARGET_CLONES void adamw_kernel_rounding(float* __restrict p, const float* __restrict g,
                                               float* __restrict m, float* __restrict v,
                                               uint16_t* __restrict p16, int64_t n,
                                               const AdamWScalars<float> s) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i] * s.grad_scale;
    const float mi = s.b1 * m[i] + s.one_minus_b1 * gi;
    const float vi = s.b2 * v[i] + s.one_minus_b2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float pi = p[i] * s.decay - s.step * mi / (std::sqrt(vi) / s.sqrt_bc2 + s.eps);
    p[i] = pi;
    p16[i] = kernels::bfloat16_bits(pi);
  }
}

// One tensor's share of an update: where its elements sit and its constants;
// p16: its bfloat16 copy to refresh, or null.
template <class T>
struct AdamWSpan {
  T *p, *m, *v;
  const T* g;
  int64_t n;
  AdamWScalars<T> s;
  uint16_t* p16 = nullptr;
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
        if constexpr (std::is_same_v<T, float>) {
          if (sp.p16) {
            adamw_kernel_rounding(sp.p + o, sp.g + o, sp.m + o, sp.v + o, sp.p16 + o, e - b, sp.s);
            base += sp.n;
            continue;
          }
        }
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
    p16_.emplace_back(g.params.size());
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
  std::vector<std::pair<size_t, size_t>> refreshed;  // parameters whose bfloat16 copy the update writes
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
          span.p16 = bf16_copy(gi, i);
          if (span.p16) refreshed.emplace_back(gi, i);
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
  for (const auto& [gi, i] : refreshed) publish_bfloat16_copy(groups_[gi].params[i].data(), p16_[gi][i]);
}

uint16_t* AdamW::bf16_copy(size_t gi, size_t i) {
  const Tensor& data = groups_[gi].params[i].data();
  Tensor& copy = p16_[gi][i];
  if (!autocast_rounded(data)) {  // not read by a bf16 matmul (any more): no copy
    if (copy.defined()) forget_bfloat16_copy(data);
    copy = Tensor();
    return nullptr;
  }
  if (!copy.defined()) copy = Tensor::empty(data.shape(), DType::BFloat16);
  copy.bump_version();  // a graph that saved last step's copy fails at backward, as for the weight
  return static_cast<uint16_t*>(copy.raw_data());
}

AdamW::~AdamW() {
  for (size_t gi = 0; gi < p16_.size(); ++gi) {
    for (size_t i = 0; i < p16_[gi].size(); ++i) {
      if (p16_[gi][i].defined()) forget_bfloat16_copy(groups_[gi].params[i].data());
    }
  }
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
