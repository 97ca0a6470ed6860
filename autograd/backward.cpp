// The backward pass and op recording. backward() walks the graph once, in
// reverse creation order (a max-heap on sequence_nr over nodes whose every
// consumer has run), iteratively: no recursion however deep the model.
// Gradients arriving at a node are summed; each is first reduced to the
// input's shape (the one place broadcasting is undone). A leaf's gradient is
// accumulated into .grad when its last contribution arrives, then its hooks fire.
// backward(outputs, grads) starts one such pass from several outputs at once
// (activation checkpointing back-propagates a block's output and MoE losses so).
#include <atomic>
#include <queue>
#include <unordered_map>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/kernels/elementwise.h"
#include "core/kernels/reduce.h"

namespace ember {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
}

const Tensor& SavedTensor::get() const {
  EMBER_CHECK(tensor_.version() == version_,
              "a tensor saved for backward was modified in place after it was saved (version ",
              tensor_.version(), ", saved at version ", version_,
              "); clone it before writing to it");
  return tensor_;
}

bool needs_grad(const Variable& v) { return grad_enabled() && v.defined() && v.requires_grad(); }

Variable record(const char* name, const std::vector<Variable>& inputs, Tensor output,
                BackwardFn backward, BackwardIntoFn backward_into) {
  bool any = false;
  for (const Variable& v : inputs) any = any || needs_grad(v);
  if (!any) return Variable(std::move(output), false);
  auto node = std::make_shared<Node>();
  node->name = name;
  node->sequence_nr = g_next_sequence_nr++;
  node->family = prof::current_family();
  node->inputs.reserve(inputs.size());
  node->input_shapes.reserve(inputs.size());
  for (const Variable& v : inputs) {
    Edge e;
    if (needs_grad(v)) {
      if (v.is_leaf()) {
        e.leaf = v.impl();
      } else {
        e.node = v.grad_fn();
      }
    }
    node->inputs.push_back(std::move(e));
    node->input_shapes.push_back(v.defined() ? v.shape() : Shape{});
  }
  node->backward = std::move(backward);
  if (node->inputs.size() == 1) node->backward_into = std::move(backward_into);
  auto impl = std::make_shared<VariableImpl>();
  impl->data = std::move(output);
  impl->requires_grad = true;
  impl->grad_fn = std::move(node);
  return Variable(std::move(impl));
}

namespace {

// True when nobody else can see t's buffer: it may be adopted or written in place.
bool sole_owner(const Tensor& t) {
  return t.storage().use_count() == 1 && t.is_contiguous() &&
         t.storage()->nbytes() == static_cast<size_t>(t.numel()) * dtype_size(t.dtype()) &&
         t.offset() == 0;
}

void accumulate_leaf(const std::shared_ptr<VariableImpl>& impl, Tensor g) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  VariableImpl& leaf = *impl;
  if (!leaf.grad.defined()) {
    // Adopt g's buffer when it is ours alone; otherwise copy (g may alias another
    // gradient, e.g. add passes g through to both inputs).
    if (g.dtype() != leaf.data.dtype()) {
      leaf.grad = g.to(leaf.data.dtype());
    } else {
      leaf.grad = sole_owner(g) ? std::move(g) : g.clone();
    }
  } else {
    kernels::add_(leaf.grad, g);
  }
  Variable handle{impl};
  for (auto& hook : leaf.post_accumulate_hooks) hook(handle);
}

// Sums a new contribution into a pending gradient, in place when the slot is unshared. g is
// taken by value: a caller that moves its last reference in lets the slot (and then a leaf,
// accumulate_leaf) own the buffer alone, instead of a copy of every parameter's gradient.
void add_into(Tensor& slot, Tensor g) {
  EMBER_PROFILE_SCOPE(kElementwiseFamily);
  if (!slot.defined()) {
    slot = std::move(g);
  } else if (slot.shape() == g.shape() && slot.dtype() == g.dtype() && !slot.shares_storage(g) &&
             sole_owner(slot)) {
    kernels::add_(slot, g);
  } else {
    slot = kernels::add(slot, g);
  }
}

// The pending gradient an edge's contribution would be added to, when one exists that nobody
// else holds (a backward_into may then add into it in place), else nullptr.
Tensor* pending_slot(const Edge& e, std::unordered_map<const Node*, Tensor>& grads,
                     std::unordered_map<const VariableImpl*, Tensor>& leaf_grads) {
  Tensor* slot = nullptr;
  if (e.node) {
    auto it = grads.find(e.node.get());
    if (it != grads.end()) slot = &it->second;
  } else if (e.leaf) {
    auto it = leaf_grads.find(e.leaf.get());
    if (it != leaf_grads.end()) slot = &it->second;
  }
  return slot && slot->defined() && sole_owner(*slot) ? slot : nullptr;
}

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// One backward pass's bookkeeping: the contributions each node and leaf still awaits, the
// gradients summed so far, and the nodes whose consumers are all done, latest first.
struct BackwardPass {
  std::unordered_map<const Node*, int> pending;
  std::unordered_map<const VariableImpl*, int> leaf_pending;
  std::unordered_map<const Node*, Tensor> grads;
  std::unordered_map<const VariableImpl*, Tensor> leaf_grads;
  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
};

// Pass 1: counts, for every node and leaf reachable from roots, how many edges point at it.
void count_consumers(const std::vector<Variable>& roots, BackwardPass& pass) {
  std::vector<Node*> stack;
  for (const Variable& r : roots) {
    Node* n = r.grad_fn().get();
    if (n && pass.pending.emplace(n, 0).second) stack.push_back(n);
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge& e : n->inputs) {
      if (e.node) {
        if (pass.pending.emplace(e.node.get(), 0).second) stack.push_back(e.node.get());
        pass.pending[e.node.get()]++;
      } else if (e.leaf) {
        pass.leaf_pending[e.leaf.get()]++;
      }
    }
  }
}

// The roots' seeds are their first contributions; a leaf root no node reaches is accumulated
// at once.
void seed_roots(const std::vector<Variable>& roots, const std::vector<Tensor>& seeds,
                BackwardPass& pass) {
  for (size_t r = 0; r < roots.size(); ++r) {
    if (roots[r].is_leaf()) {
      if (!pass.leaf_pending.count(roots[r].impl().get())) {
        accumulate_leaf(roots[r].impl(), seeds[r]);
      } else {
        add_into(pass.leaf_grads[roots[r].impl().get()], seeds[r]);
      }
      continue;
    }
    Node* n = roots[r].grad_fn().get();
    const bool first_seed = !pass.grads.count(n);
    add_into(pass.grads[n], seeds[r]);
    if (first_seed && pass.pending[n] == 0) pass.ready.push(n);
  }
}

// The gradients of n's inputs from g, the gradient summed at n (none when g is undefined: no
// gradient reached n).
Grads input_grads(Node* n, const Tensor& g, BackwardPass& pass) {
  Grads in_grads(n->inputs.size());
  if (g.defined()) {
    EMBER_CHECK(n->backward, "backward through ", n->name,
                " a second time: its saved tensors were freed; pass retain_graph = true to the "
                "first backward");
    try {
      EMBER_PROFILE_CLAIM(n->family);  // backward time goes to the op's family
      Tensor* slot =
          n->backward_into ? pending_slot(n->inputs[0], pass.grads, pass.leaf_grads) : nullptr;
      if (!(slot && n->backward_into(g, *slot))) in_grads = n->backward(g);
    } catch (const Error& err) {
      throw Error(detail::concat("backward of ", n->name, ": ", err.what()));
    }
  }
  EMBER_CHECK(in_grads.size() == n->inputs.size(), "backward of ", n->name, " returned ",
              in_grads.size(), " gradients for ", n->inputs.size(), " inputs");
  return in_grads;
}

// Adds gi (maybe undefined) to what edge e's node or leaf has pending and counts the
// contribution: a node whose consumers are all done becomes ready, a leaf accumulates its sum.
void deliver(const Edge& e, Tensor gi, BackwardPass& pass) {
  if (e.node) {
    if (gi.defined()) add_into(pass.grads[e.node.get()], std::move(gi));
    if (--pass.pending[e.node.get()] == 0) pass.ready.push(e.node.get());
    return;
  }
  if (gi.defined()) add_into(pass.leaf_grads[e.leaf.get()], std::move(gi));
  if (--pass.leaf_pending[e.leaf.get()] == 0) {
    auto it = pass.leaf_grads.find(e.leaf.get());
    if (it != pass.leaf_grads.end()) {
      accumulate_leaf(e.leaf, std::move(it->second));
      pass.leaf_grads.erase(it);
    }
  }
}

// One backward pass from several outputs (each seeded with its gradient); nodes run latest first.
void run_backward(const std::vector<Variable>& roots, const std::vector<Tensor>& seeds,
                  bool retain_graph) {
  NoGradGuard no_grad;  // backward math records nothing
  BackwardPass pass;
  count_consumers(roots, pass);
  // Pass 2: run nodes whose consumers are all done, latest first.
  seed_roots(roots, seeds, pass);
  while (!pass.ready.empty()) {
    Node* n = pass.ready.top();
    pass.ready.pop();
    Tensor g = std::move(pass.grads[n]);
    pass.grads.erase(n);
    Grads in_grads = input_grads(n, g, pass);
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      const Edge& e = n->inputs[i];
      if (!e.needed()) continue;
      Tensor gi = std::move(in_grads[i]);
      if (gi.defined() && gi.shape() != n->input_shapes[i]) {
        EMBER_PROFILE_SCOPE(kElementwiseFamily);
        gi = kernels::sum_to_shape(gi, n->input_shapes[i]);
      }
      deliver(e, std::move(gi), pass);
    }
    if (!retain_graph) {  // frees what the op saved
      n->backward = nullptr;
      n->backward_into = nullptr;
    }
  }
}

// The gradient out's backward starts from: grad, or 1 for a one-element out.
Tensor checked_seed(const Variable& out, const Tensor& grad) {
  EMBER_CHECK(out.defined(), "backward: variable is undefined");
  EMBER_CHECK(out.requires_grad(), "backward: this variable does not require grad and has no grad_fn");
  Tensor seed = grad;
  if (!seed.defined()) {
    EMBER_CHECK(out.numel() == 1, "backward: a gradient must be given for a non-scalar output of shape ",
                shape_str(out.shape()));
    seed = Tensor::ones(out.shape(), out.dtype());
  }
  EMBER_CHECK(seed.shape() == out.shape(), "backward: gradient of shape ", shape_str(seed.shape()),
              " does not match output of shape ", shape_str(out.shape()));
  return seed;
}

}  // namespace

void Variable::backward(const Tensor& grad_root, bool retain_graph) const {
  const Tensor seed = checked_seed(*this, grad_root);
  if (is_leaf()) {
    NoGradGuard no_grad;  // hooks record nothing
    accumulate_leaf(impl(), seed);
    return;
  }
  run_backward({*this}, {seed}, retain_graph);
}

void backward(const std::vector<Variable>& outputs, const std::vector<Tensor>& grads,
              bool retain_graph) {
  EMBER_CHECK(outputs.size() == grads.size(), "backward: ", grads.size(), " gradients for ",
              outputs.size(), " outputs");
  std::vector<Tensor> seeds;
  for (size_t i = 0; i < outputs.size(); ++i) seeds.push_back(checked_seed(outputs[i], grads[i]));
  run_backward(outputs, seeds, retain_graph);
}

}  // namespace ember
