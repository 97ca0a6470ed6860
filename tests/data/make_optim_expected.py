#!/usr/bin/python3
"""Expected values for tests/test_optim.cpp, computed with PyTorch
(Debian's python3-torch). Run: /usr/bin/python3 tests/data/make_optim_expected.py"""
import math
import torch

torch.set_default_dtype(torch.float64)


def fmt(xs):
    return "{" + ", ".join(repr(float(x)) for x in xs) + "}"


# AdamW: a 2x3 matrix (decayed) and a 3-vector (not), three steps with fixed grads.
w = torch.tensor([[0.5, -1.0, 2.0], [0.0, 0.25, -0.75]], requires_grad=True)
b = torch.tensor([0.1, -0.2, 0.3], requires_grad=True)
opt = torch.optim.AdamW([{"params": [w], "weight_decay": 0.1}, {"params": [b], "weight_decay": 0.0}],
                        lr=0.01, betas=(0.9, 0.95), eps=1e-8)
grads_w = [[[0.3, -0.1, 0.2], [1.0, 0.0, -0.5]], [[-0.2, 0.4, 0.1], [0.5, 0.5, 0.5]], [[0.0, 0.0, 1.0], [-1.0, 2.0, 0.1]]]
grads_b = [[0.05, -0.5, 1.5], [0.2, 0.2, -0.2], [-1.0, 0.0, 0.3]]
lrs = [0.01, 0.005, 0.02]
for gw, gb, lr in zip(grads_w, grads_b, lrs):
    for g in opt.param_groups:
        g["lr"] = lr
    w.grad = torch.tensor(gw)
    b.grad = torch.tensor(gb)
    opt.step()
print("adamw w", fmt(w.detach().flatten()))
print("adamw b", fmt(b.detach().flatten()))
print("adamw exp_avg_sq w", fmt(opt.state[w]["exp_avg_sq"].flatten()))

# SGD with momentum 0.9, Nesterov, weight decay 0.01, two steps.
p = torch.tensor([1.0, -2.0], requires_grad=True)
sgd = torch.optim.SGD([p], lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)
for g in ([0.5, 0.5], [-1.0, 0.25]):
    p.grad = torch.tensor(g)
    sgd.step()
print("sgd nesterov", fmt(p.detach()))

# Clipping: two tensors, max_norm 1.
a = torch.zeros(3, requires_grad=True)
c = torch.zeros(2, requires_grad=True)
a.grad = torch.tensor([3.0, 0.0, 4.0])
c.grad = torch.tensor([12.0, 0.0])
norm = torch.nn.utils.clip_grad_norm_([a, c], 1.0)
print("clip norm", repr(float(norm)))
print("clip a", fmt(a.grad), "c", fmt(c.grad))


# Schedules (the formulas of docs/model.md#learning-rate-schedules), by hand.
def cosine(s, lr_max, lr_min, warmup, total):
    if s < warmup:
        return lr_max * (s + 1) / warmup
    prog = min(1.0, (s - warmup) / max(1, total - warmup))
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * prog))


print("cosine", fmt([cosine(s, 1e-3, 1e-4, 10, 100) for s in (0, 4, 9, 10, 37, 99, 100, 150)]))
