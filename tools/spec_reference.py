"""Independent float64 PyTorch implementation of docs/model.md and docs/formats.md's batches.

Written from the contract alone (not from ember's C++), so that comparing the two
checks both. Model math (docs/model.md#layers) for every config feature with dropout 0,
AdamW + cosine schedule + global-norm clipping (docs/model.md#optimizer), and the llm.c token
shard format with the sequential window order (docs/formats.md#token-shards-bin).
Run with Debian's interpreter: /usr/bin/python3 (torch, numpy).
"""
import json
import math

import numpy as np
import torch
import torch.nn.functional as F

# ----------------------------------------------------------------------------
# docs/model.md#config

DEFAULTS = dict(vocab_size=256, d_model=256, n_layers=4, n_heads=8, n_kv_heads=None,
                head_dim=None, ffn_hidden=None, ffn_act="swiglu", norm="rmsnorm",
                norm_eps=1e-5, pos="rope", rope_theta=10000.0, max_seq_len=256,
                qk_norm=False, bias=False, tie_embeddings=True, parallel_block=False,
                sliding_window=0, global_every=0, attn_softcap=0.0, final_softcap=0.0,
                z_loss_coef=0.0, dropout=0.0, moe=None)
MOE_DEFAULTS = dict(n_experts=8, top_k=2, expert_hidden=None, n_shared=0, norm_topk_prob=True,
                    every=1, aux_loss_coef=0.01, router_z_loss_coef=0.0)


def resolve_config(raw):
    """Fill the config defaults; returns a new dict with every key set."""
    if isinstance(raw, str):
        raw = json.loads(raw)
    for k in raw:
        if k not in DEFAULTS:
            raise ValueError(f"unknown config key {k}")
    c = dict(DEFAULTS)
    c.update(raw)
    if c["n_kv_heads"] is None:
        c["n_kv_heads"] = c["n_heads"]
    if c["head_dim"] is None:
        c["head_dim"] = c["d_model"] // c["n_heads"]
    if c["ffn_hidden"] is None:
        if c["ffn_act"] in ("swiglu", "geglu"):
            c["ffn_hidden"] = 256 * math.ceil((8 * c["d_model"] // 3) / 256)
        else:
            c["ffn_hidden"] = 4 * c["d_model"]
    assert c["n_heads"] % c["n_kv_heads"] == 0, "n_heads % n_kv_heads"
    assert c["pos"] != "rope" or c["head_dim"] % 2 == 0, "even head_dim with rope"
    assert c["dropout"] == 0, "reference supports dropout 0 only"
    if c["moe"] is not None:
        for k in c["moe"]:
            if k not in MOE_DEFAULTS:
                raise ValueError(f"unknown moe key {k}")
        m = dict(MOE_DEFAULTS)
        m.update(c["moe"])
        if m["expert_hidden"] is None:
            m["expert_hidden"] = c["ffn_hidden"]
        assert m["top_k"] <= m["n_experts"], "top_k <= n_experts"
        c["moe"] = m
    return c


def is_moe_layer(c, i):
    m = c["moe"]
    return m is not None and i % m["every"] == m["every"] - 1


def is_glu(act):
    return act in ("swiglu", "geglu")


# ----------------------------------------------------------------------------
# docs/model.md#parameter-names: names and shapes

def param_shapes(c):
    """Ordered list of (name, shape) for the model of config c (resolved)."""
    d, V = c["d_model"], c["vocab_size"]
    hq, hkv, dh = c["n_heads"], c["n_kv_heads"], c["head_dim"]
    out = [("model.embed_tokens.weight", (V, d))]
    if c["pos"] == "learned":
        out.append(("model.embed_positions.weight", (c["max_seq_len"], d)))

    def norm(name):
        out.append((name + ".weight", (d,)))
        if c["norm"] == "layernorm":
            out.append((name + ".bias", (d,)))

    def linear(name, o, i, bias=c["bias"]):
        out.append((name + ".weight", (o, i)))
        if bias:
            out.append((name + ".bias", (o,)))

    def ffn(prefix, m):
        if is_glu(c["ffn_act"]):
            linear(prefix + ".gate_proj", m, d)
        linear(prefix + ".up_proj", m, d)
        linear(prefix + ".down_proj", d, m)

    for i in range(c["n_layers"]):
        p = f"model.layers.{i}"
        norm(p + ".input_layernorm")
        linear(p + ".self_attn.q_proj", hq * dh, d)
        linear(p + ".self_attn.k_proj", hkv * dh, d)
        linear(p + ".self_attn.v_proj", hkv * dh, d)
        linear(p + ".self_attn.o_proj", d, hq * dh)
        if c["qk_norm"]:
            out.append((p + ".self_attn.q_norm.weight", (dh,)))
            out.append((p + ".self_attn.k_norm.weight", (dh,)))
        if not c["parallel_block"]:
            norm(p + ".post_attention_layernorm")
        if is_moe_layer(c, i):
            m = c["moe"]
            linear(p + ".mlp.gate", m["n_experts"], d, bias=False)
            for e in range(m["n_experts"]):
                ffn(p + f".mlp.experts.{e}", m["expert_hidden"])
            for s in range(m["n_shared"]):
                ffn(p + f".mlp.shared_experts.{s}", m["expert_hidden"])
        else:
            ffn(p + ".mlp", c["ffn_hidden"])
    norm("model.norm")
    if not c["tie_embeddings"]:
        linear("lm_head", V, d, bias=False)
    return out


def random_params(c, seed=0, std=0.1):
    """float32 numpy weights: normal(std) for matrices and biases, 1 + normal(std) for norm weights."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, shape in param_shapes(c):
        is_norm_w = len(shape) == 1 and ("norm" in name) and name.endswith(".weight")
        a = rng.normal(0.0, std, size=shape)
        if is_norm_w:
            a = 1.0 + a
        params[name] = a.astype(np.float32)
    return params


# ----------------------------------------------------------------------------
# docs/model.md#layers: math

def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def apply_norm(c, P, name, x):
    if c["norm"] == "rmsnorm":
        return rms_norm(x, P[name + ".weight"], c["norm_eps"])
    return F.layer_norm(x, (x.shape[-1],), P[name + ".weight"], P[name + ".bias"], c["norm_eps"])


def linear(P, name, x):
    y = x @ P[name + ".weight"].t()
    b = P.get(name + ".bias")
    return y if b is None else y + b


def act_fn(name, x):
    if name in ("swiglu",):
        return F.silu(x)
    if name in ("geglu", "gelu"):
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    if name == "gelu_tanh":
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return torch.clamp(x, min=0.0)
    raise ValueError(name)


def ffn(c, P, prefix, x):
    a = c["ffn_act"]
    if is_glu(a):
        h = act_fn(a, linear(P, prefix + ".gate_proj", x)) * linear(P, prefix + ".up_proj", x)
    else:
        h = act_fn(a, linear(P, prefix + ".up_proj", x))
    return linear(P, prefix + ".down_proj", h)


def rope(x, theta):
    """x: [B, H, T, dh]; rotate-half, positions 0..T-1."""
    T, dh = x.shape[-2], x.shape[-1]
    half = dh // 2
    i = torch.arange(half, dtype=torch.float64)
    inv_freq = theta ** (-2.0 * i / dh)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]  # [T, half]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def attention_mask(c, layer, T):
    """bool [T, T], True where query p may read key j."""
    p = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    allowed = j <= p
    w, ge = c["sliding_window"], c["global_every"]
    is_global = ge > 0 and layer % ge == ge - 1
    if w > 0 and not is_global:
        allowed = allowed & (p - j < w)
    return allowed


def attention(c, P, prefix, x, layer):
    B, T, _ = x.shape
    hq, hkv, dh = c["n_heads"], c["n_kv_heads"], c["head_dim"]
    q = linear(P, prefix + ".q_proj", x).view(B, T, hq, dh).transpose(1, 2)
    k = linear(P, prefix + ".k_proj", x).view(B, T, hkv, dh).transpose(1, 2)
    v = linear(P, prefix + ".v_proj", x).view(B, T, hkv, dh).transpose(1, 2)
    if c["qk_norm"]:
        q = rms_norm(q, P[prefix + ".q_norm.weight"], c["norm_eps"])
        k = rms_norm(k, P[prefix + ".k_norm.weight"], c["norm_eps"])
    if c["pos"] == "rope":
        q = rope(q, float(c["rope_theta"]))
        k = rope(k, float(c["rope_theta"]))
    group = hq // hkv
    kv_index = torch.arange(hq) // group  # query head j reads kv head j // group
    k = k[:, kv_index]
    v = v[:, kv_index]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
    cap = c["attn_softcap"]
    if cap > 0:
        s = cap * torch.tanh(s / cap)
    s = s.masked_fill(~attention_mask(c, layer, T), float("-inf"))
    wts = torch.softmax(s, dim=-1)
    o = (wts @ v).transpose(1, 2).reshape(B, T, hq * dh)
    return linear(P, prefix + ".o_proj", o)


def moe(c, P, prefix, x):
    """Returns (y, aux, router_z) over the N = B*T tokens of the micro-batch."""
    m = c["moe"]
    B, T, d = x.shape
    xs = x.reshape(B * T, d)
    N, E, K = B * T, m["n_experts"], m["top_k"]
    r = xs @ P[prefix + ".gate.weight"].t()  # [N, E]
    p = torch.softmax(r, dim=-1)
    # top_k by p, ties to the lower index: sort by (-p, index) with a stable sort
    order = torch.sort(-p.detach(), dim=-1, stable=True).indices
    chosen = order[:, :K]  # [N, K]
    wsel = torch.gather(p, 1, chosen)
    if m["norm_topk_prob"]:
        wsel = wsel / wsel.sum(-1, keepdim=True)
    dense_w = torch.zeros(N, E, dtype=x.dtype).scatter(1, chosen, wsel)
    y = torch.zeros_like(xs)
    for e in range(E):
        rows = (chosen == e).any(-1).nonzero().flatten()
        if rows.numel() == 0:
            continue
        y = y.index_add(0, rows, dense_w[rows, e:e + 1] * ffn(c, P, prefix + f".experts.{e}", xs[rows]))
    for s_ in range(m["n_shared"]):
        y = y + ffn(c, P, prefix + f".shared_experts.{s_}", xs)
    counts = torch.zeros(E, dtype=x.dtype)
    counts.index_add_(0, chosen.flatten(), torch.ones(N * K, dtype=x.dtype))
    f = counts / (N * K)
    Pm = p.mean(0)
    aux = E * (f * Pm).sum()
    rz = (torch.logsumexp(r, dim=-1) ** 2).mean()
    # smallest gap between the k-th and (k+1)-th probability (routing robustness)
    sp = torch.sort(p.detach(), dim=-1, descending=True).values
    gap = (sp[:, K - 1] - sp[:, K]).min().item() if K < E else float("inf")
    return y.reshape(B, T, d), aux, rz, gap


def sinusoidal(T, d):
    pe = torch.zeros(T, d, dtype=torch.float64)
    pos = torch.arange(T, dtype=torch.float64)[:, None]
    i2 = torch.arange(0, d, 2, dtype=torch.float64)
    ang = pos / (10000.0 ** (i2 / d))
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang[:, : d // 2])
    return pe


def forward_losses(c, P, inputs, targets):
    """P: name -> float64 tensor; inputs/targets: int64 [B, T].

    Returns dict of scalar tensors total, ce, z, aux, router_z and 'min_gap'
    (float, smallest top-k routing margin)."""
    B, T = inputs.shape
    x = P["model.embed_tokens.weight"][inputs]
    if c["pos"] == "learned":
        x = x + P["model.embed_positions.weight"][:T]
    elif c["pos"] == "sinusoidal":
        x = x + sinusoidal(T, c["d_model"])
    auxes, rzs, gap = [], [], float("inf")
    for i in range(c["n_layers"]):
        p = f"model.layers.{i}"

        def mlp(h):
            nonlocal gap
            if is_moe_layer(c, i):
                y, a, rz, g = moe(c, P, p + ".mlp", h)
                auxes.append(a)
                rzs.append(rz)
                gap = min(gap, g)
                return y
            return ffn(c, P, p + ".mlp", h)

        if c["parallel_block"]:
            h = apply_norm(c, P, p + ".input_layernorm", x)
            x = x + attention(c, P, p + ".self_attn", h, i) + mlp(h)
        else:
            x = x + attention(c, P, p + ".self_attn", apply_norm(c, P, p + ".input_layernorm", x), i)
            x = x + mlp(apply_norm(c, P, p + ".post_attention_layernorm", x))
    x = apply_norm(c, P, "model.norm", x)
    head = P["model.embed_tokens.weight"] if c["tie_embeddings"] else P["lm_head.weight"]
    logits = x @ head.t()
    fc = c["final_softcap"]
    if fc > 0:
        logits = fc * torch.tanh(logits / fc)
    logits = logits.reshape(B * T, -1)
    y = targets.reshape(B * T)
    lse = torch.logsumexp(logits, dim=-1)
    ce = (lse - logits.gather(1, y[:, None]).squeeze(1)).mean()
    z = (lse ** 2).mean()
    zero = torch.zeros((), dtype=torch.float64)
    aux = torch.stack(auxes).mean() if auxes else zero
    rz = torch.stack(rzs).mean() if rzs else zero
    total = ce + c["z_loss_coef"] * z
    if c["moe"] is not None:
        total = total + c["moe"]["aux_loss_coef"] * aux + c["moe"]["router_z_loss_coef"] * rz
    return dict(total=total, ce=ce, z=z, aux=aux, router_z=rz, min_gap=gap)


def to_torch(params, requires_grad=True):
    return {k: torch.tensor(np.asarray(v), dtype=torch.float64).requires_grad_(requires_grad)
            for k, v in params.items()}


def eval_with_grads(c, params, batches):
    """Mean over batches of each loss term, and the gradient of the mean total.

    params: name -> numpy array; batches: list of (inputs, targets) int64 tensors."""
    P = to_torch(params)
    sums = None
    gap = float("inf")
    for inp, tgt in batches:
        L = forward_losses(c, P, inp, tgt)
        gap = min(gap, L.pop("min_gap"))
        sums = L if sums is None else {k: sums[k] + L[k] for k in L}
    n = len(batches)
    means = {k: v / n for k, v in sums.items()}
    means["total"].backward()
    grads = {k: (v.grad if v.grad is not None else torch.zeros_like(v)).numpy() for k, v in P.items()}
    return {k: v.item() for k, v in means.items()}, grads, gap


# ----------------------------------------------------------------------------
# docs/model.md#optimizer: AdamW, schedule, clipping

def lr_at(s, lr_max, lr_min, warmup, total):
    if s < warmup:
        return lr_max * (s + 1) / warmup
    frac = min(1.0, (s - warmup) / max(1, total - warmup))
    return lr_min + 0.5 * (lr_max - lr_min) * (1.0 + math.cos(math.pi * frac))


def train_reference(c, params, batch_of_step, steps, lr, min_lr, warmup, wd, clip,
                    b1=0.9, b2=0.95, eps=1e-8):
    """Plain loop of `steps` AdamW steps (grad accumulation 1, one rank).

    As torch.optim.AdamW: a tensor without a gradient in a step (an expert no
    token picked) is skipped, weight decay included, and its own step count,
    which its bias correction uses, does not advance.
    batch_of_step(s) -> (inputs, targets). Returns (final params as float64 numpy, ce per step)."""
    P = to_torch(params)
    m = {k: torch.zeros_like(v) for k, v in P.items()}
    v2 = {k: torch.zeros_like(v) for k, v in P.items()}
    n_updates = {k: 0 for k in P}  # torch's per-parameter state['step']
    losses = []
    for s in range(steps):
        inp, tgt = batch_of_step(s)
        for t in P.values():
            t.grad = None
        L = forward_losses(c, P, inp, tgt)
        L["total"].backward()
        losses.append(L["ce"].item())
        g = {k: p.grad for k, p in P.items() if p.grad is not None}
        if clip > 0:
            norm = math.sqrt(sum((gg ** 2).sum().item() for gg in g.values()))
            scale = min(1.0, clip / (norm + 1e-6))
            g = {k: gg * scale for k, gg in g.items()}
        a = lr_at(s, lr, min_lr, warmup, steps)
        with torch.no_grad():
            for k, p in P.items():
                if k not in g:
                    continue
                n_updates[k] += 1
                t_ = n_updates[k]
                if p.dim() >= 2:
                    p.mul_(1.0 - a * wd)
                m[k].mul_(b1).add_((1 - b1) * g[k])
                v2[k].mul_(b2).add_((1 - b2) * g[k] ** 2)
                denom = v2[k].sqrt() / math.sqrt(1 - b2 ** t_) + eps
                p.sub_((a / (1 - b1 ** t_)) * m[k] / denom)
    return {k: v.detach().numpy() for k, v in P.items()}, losses


# ----------------------------------------------------------------------------
# docs/formats.md#token-shards-bin: shards and the sequential order

SHARD_MAGIC = 20240520


def write_shard(path, tokens, uint32=False):
    tokens = np.asarray(tokens)
    header = np.zeros(256, dtype="<i4")
    header[0] = SHARD_MAGIC
    header[1] = 2 if uint32 else 1
    header[2] = len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u4" if uint32 else "<u2").tobytes())


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        assert header[0] == SHARD_MAGIC
        dt = "<u2" if header[1] == 1 else "<u4"
        return np.frombuffer(f.read(), dtype=dt)[: header[2]].astype(np.int64)


def sequential_batch(tokens, s, B, T, A=1, W=1, u=0, r=0):
    """Micro-step u of step s on rank r: windows ((s*A+u)*W+r)*B+b mod n_windows."""
    n_windows = (len(tokens) - 1) // T  # whole windows of T+1 tokens starting at w*T
    rows = []
    for b in range(B):
        w = (((s * A + u) * W + r) * B + b) % n_windows
        rows.append(tokens[w * T: w * T + T + 1])
    a = torch.tensor(np.stack(rows), dtype=torch.int64)
    return a[:, :-1], a[:, 1:]
