// recompute(): the no-grad forward, the node that recomputes fn in backward and the nodes that
// hand the other outputs' gradients to it (see recompute.h).
#include "autograd/recompute.h"

#include <memory>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"

namespace ember {
namespace {

// Everything the recompute needs, shared by the recompute's nodes.
struct Replay {
  RecomputeFn fn;
  std::vector<SavedTensor> inputs;
  std::vector<bool> input_requires_grad;
  std::vector<Generator*> generators;
  std::vector<uint64_t> start_offsets, end_offsets;
  DType autocast = DType::Float32;
  std::vector<Tensor> other_grads;  // gradients of outputs 1.., handed over by their nodes
};

std::vector<uint64_t> offsets_of(const std::vector<Generator*>& generators) {
  std::vector<uint64_t> offsets;
  for (const Generator* g : generators) offsets.push_back(g->offset);
  return offsets;
}

void set_offsets(const std::vector<Generator*>& generators, const std::vector<uint64_t>& offsets) {
  for (size_t i = 0; i < generators.size(); ++i) generators[i]->offset = offsets[i];
}

// RAII: grad mode on, the generators' offsets put back on exit (also on an exception).
class ReplayScope {
 public:
  explicit ReplayScope(const std::vector<Generator*>& generators)
      : grad_was_(grad_enabled()), generators_(generators), offsets_(offsets_of(generators)) {
    set_grad_enabled(true);
  }
  ~ReplayScope() {
    set_offsets(generators_, offsets_);
    set_grad_enabled(grad_was_);
  }
  ReplayScope(const ReplayScope&) = delete;
  ReplayScope& operator=(const ReplayScope&) = delete;

 private:
  bool grad_was_;
  std::vector<Generator*> generators_;
  std::vector<uint64_t> offsets_;
};

// fn again over detached inputs, from the forward's generator offsets and in its autocast dtype.
std::vector<Variable> recompute(Replay& r, std::vector<Variable>& detached) {
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    detached.emplace_back(r.inputs[i].get(), r.input_requires_grad[i]);
  }
  set_offsets(r.generators, r.start_offsets);
  std::vector<Variable> outs = r.fn(detached);
  EMBER_CHECK(offsets_of(r.generators) == r.end_offsets,
              "recompute: the recompute drew other random numbers than the forward (fn must be "
              "deterministic)");
  EMBER_CHECK(outs.size() == 1 + r.other_grads.size(), "recompute: the recompute returned ",
              outs.size(), " outputs, the forward ", 1 + r.other_grads.size());
  return outs;
}

// The recompute node's backward: recompute, one backward from every output that got a gradient,
// the detached inputs' gradients out (none for the params: their .grad is already accumulated).
Grads replay_backward(Replay& r, const Tensor& g, size_t n_params) {
  std::vector<Variable> detached;
  {
    ReplayScope scope(r.generators);
    std::optional<AutocastGuard> mixed;
    if (autocast_dtype() != r.autocast) mixed.emplace(r.autocast);
    const std::vector<Variable> outs = recompute(r, detached);
    std::vector<Variable> roots;
    std::vector<Tensor> seeds;
    for (size_t k = 0; k < outs.size(); ++k) {
      const Tensor& seed = k == 0 ? g : r.other_grads[k - 1];
      if (!seed.defined() || !outs[k].requires_grad()) continue;
      roots.push_back(outs[k]);
      seeds.push_back(seed);
    }
    for (Tensor& t : r.other_grads) t = Tensor();
    if (!roots.empty()) backward(roots, seeds);
  }
  Grads grads(detached.size() + n_params);
  for (size_t i = 0; i < detached.size(); ++i) {
    if (detached[i].requires_grad()) grads[i] = detached[i].grad();
  }
  return grads;
}

}  // namespace

std::vector<Variable> recompute(const RecomputeFn& fn, const std::vector<Variable>& inputs,
                                 const RecomputeOptions& options) {
  bool any = false;
  for (const Variable& v : inputs) any = any || needs_grad(v);
  for (const Variable& v : options.params) any = any || needs_grad(v);
  if (!any) return fn(inputs);

  auto replay = std::make_shared<Replay>();
  replay->fn = fn;
  for (const Variable& v : inputs) {
    replay->inputs.emplace_back(v.data());
    replay->input_requires_grad.push_back(v.requires_grad());
  }
  replay->generators = options.generators;
  replay->start_offsets = offsets_of(options.generators);
  replay->autocast = autocast_dtype();
  std::vector<Variable> outs;
  {
    NoGradGuard no_grad;
    outs = fn(inputs);
  }
  EMBER_CHECK(!outs.empty(), "recompute: fn returned no outputs");
  replay->end_offsets = offsets_of(options.generators);
  replay->other_grads.resize(outs.size() - 1);

  std::vector<Variable> edges = inputs;
  edges.insert(edges.end(), options.params.begin(), options.params.end());
  const size_t n_params = options.params.size();
  std::vector<Variable> result;
  result.push_back(record("recompute", edges, outs[0].data(), [replay, n_params](const Tensor& g) {
    return replay_backward(*replay, g, n_params);
  }));
  for (size_t k = 1; k < outs.size(); ++k) {
    result.push_back(record("recompute_output", {result[0]}, outs[k].data(),
                            [replay, k](const Tensor& g) -> Grads {
                              replay->other_grads[k - 1] = g;
                              return {Tensor()};
                            }));
  }
  return result;
}

}  // namespace ember
