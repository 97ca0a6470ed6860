// SGD update, one loop per tensor.
#include "optim/sgd.h"

#include "autograd/grad_mode.h"
#include "core/threads.h"

namespace ember::optim {
namespace {

template <class T>
void sgd_update(T* p, const T* g, T* b, int64_t n, double lr, double wd, double mu, bool nesterov,
                bool first, double grad_scale) {
  const T tlr = static_cast<T>(lr), twd = static_cast<T>(wd), tmu = static_cast<T>(mu);
  const T tgs = static_cast<T>(grad_scale);
#pragma omp parallel for simd if (n > kParallelGrain)
  for (int64_t i = 0; i < n; ++i) {
    T gi = g[i] * tgs + twd * p[i];
    if (b) {
      b[i] = first ? gi : tmu * b[i] + gi;
      gi = nesterov ? gi + tmu * b[i] : b[i];
    }
    p[i] -= tlr * gi;
  }
}

}  // namespace

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer(std::move(groups)), options_(options) {
  EMBER_CHECK(!options.nesterov || options.momentum > 0, "SGD: Nesterov needs momentum > 0");
  for (const auto& g : groups_) buf_.emplace_back(g.params.size());
}

void SGD::step(double lr, double grad_scale) {
  ++step_;
  NoGradGuard no_grad;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const ParamGroup& group = groups_[gi];
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Variable& p = group.params[i];
      if (!p.grad().defined()) continue;  // as PyTorch: no grad, no update (decay included)
      ++param_step_[gi][i];
      const Tensor data = p.data();
      const Tensor grad = p.grad().contiguous();
      const bool first = options_.momentum > 0 && !buf_[gi][i].defined();
      if (first) buf_[gi][i] = Tensor::zeros(data.shape(), data.dtype());
      dispatch_float(data.dtype(), "SGD", [&](auto tag) {
        using T = decltype(tag);
        sgd_update<T>(data.data<T>(), grad.data<T>(),
                      options_.momentum > 0 ? buf_[gi][i].data<T>() : nullptr, data.numel(),
                      lr * group.lr_scale, group.weight_decay, options_.momentum, options_.nesterov,
                      first, grad_scale);
      });
      data.bump_version();
    }
  }
}

std::map<std::string, Tensor> SGD::state_dict() const {
  std::map<std::string, Tensor> out;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      if (!buf_[gi][i].defined()) continue;
      out[param_key(gi, i) + "/momentum_buffer"] = buf_[gi][i];
    }
  }
  return out;
}

void SGD::load_tensors(const StateSource& get) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (size_t i = 0; i < groups_[gi].params.size(); ++i) {
      const std::string key = param_key(gi, i) + "/momentum_buffer";
      const Tensor t = get(key);
      if (!t.defined()) {
        buf_[gi][i] = Tensor();
        continue;
      }
      EMBER_CHECK(t.shape() == groups_[gi].params[i].shape(), "SGD state: ", key,
                  " has shape ", shape_str(t.shape()));
      buf_[gi][i] = t.clone();
    }
  }
}

}  // namespace ember::optim
