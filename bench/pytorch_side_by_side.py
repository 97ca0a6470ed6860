#!/usr/bin/python3
"""ember against PyTorch eager on the same training step, side by side.

Builds dense-small, moe-small and gpt2-small in PyTorch eager from the same
config JSON files (configs/*.json, defaults and math of docs/model.md:
RMSNorm or LayerNorm, GQA with kv head j / (h_q / h_kv) (repeat_interleave),
qk_norm, rotate-half RoPE, SwiGLU / gelu_tanh, learned positions, tied
embeddings, MoE top-k with shared experts and aux loss, z-loss), times full
steps (forward, backward, clip_grad_norm_ 1.0, torch.optim.AdamW lr 3e-4,
betas 0.9/0.95, eps 1e-8, wd 0.1 on >= 2-D tensors) on random tokens at the
same B, T and thread count as `ember bench`, then runs `ember bench --json`
and prints a table: ms/step (median), ratio ember/torch, MFU of each (model
FLOPs from ember's nn::model_stats over ember's measured matmul peak), peak
RSS of each, ember's floor (the step's FLOPs, causal attention halved, at
the fastest measured rate, from `ember bench`) and floor/torch,
the smallest ratio this machine allows, and the targets (ratio <= 0.5
dense/moe, <= 0.65 gpt2-small, <= 0.6 gpt2-small-1024; MFU >= 60% dense-small,
>= 70% gpt2-small; RSS below torch) met or not. gpt2-small-1024 (`ember bench`'s
case: gpt2-small at B 8, T 1024, the pretraining shape) runs only when named; its
MFU counts causal attention as half the T x T square.

The torch children run with OPENBLAS_CORETYPE set from the CPU flags
(Cooperlake where avx512_bf16, SkylakeX with avx512f, Haswell with avx2) unless
it is set already: Debian's OpenBLAS 0.3.21 takes newer CPUs for "Prescott"
(SSE3) and runs torch's float32 step about 3x slower. The first line printed
says which it used, and a warning follows (and ends the report) when
libblas.so.3 is not OpenBLAS at all: Debian's torch (BLAS_INFO=generic) then
runs the reference BLAS, tens of times slower, and no ratio means anything.

Each torch config runs in its own subprocess (peak RSS = its VmHWM); ember
runs each config in its own process too. The two are interleaved config by
config (with --rounds R > 1, R times, alternating which goes first, taking
each side's best median), so a burst of load on a shared machine hits both.

Not part of CI. Needs torch (Debian's /usr/bin/python3 has torch 1.13):
    /usr/bin/python3 bench/pytorch_side_by_side.py [--ember build/apps/ember]
        [--preset NAME ...] [--steps 10] [--warmup 2] [--threads N] [--rounds 1]
        [--dtype float32|bf16] [--torch-dtype float32|bf16]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHAPES = {"dense-small": (8, 256), "moe-small": (8, 256), "gpt2-small": (4, 64), "gpt2-small-1024": (8, 1024)}
DEFAULT_PRESETS = ["dense-small", "moe-small", "gpt2-small"]  # gpt2-small-1024 on request (minutes a step)
MODEL = {"gpt2-small-1024": "gpt2-small"}  # ember bench's case name -> the config it runs
RATIO_TARGET = {"dense-small": 0.5, "moe-small": 0.5, "gpt2-small": 0.65, "gpt2-small-1024": 0.6}
MFU_TARGET = {"dense-small": 60.0, "gpt2-small": 70.0}
CAUSAL_MFU = {"gpt2-small-1024"}  # MFU with causal attention counted as half the T x T square


def openblas_coretype(flags_path="/proc/cpuinfo"):
    """The OPENBLAS_CORETYPE for this CPU's flags: Debian's OpenBLAS 0.3.21 takes
    Sapphire Rapids and Zen for "Prescott" (SSE3) and runs torch's float32 step about
    3x slower unless told. None where no flag applies (or the flags are unreadable)."""
    try:
        flags = set()
        for line in open(flags_path):
            if line.startswith("flags"):
                flags.update(line.split(":", 1)[1].split())
    except OSError:
        return None
    if "avx512_bf16" in flags:
        return "Cooperlake"
    if "avx512f" in flags:
        return "SkylakeX"
    if "avx2" in flags:
        return "Haswell"
    return None


def blas_warning(libblas="/usr/lib/x86_64-linux-gnu/libblas.so.3"):
    """A warning when Debian's torch (BLAS_INFO=generic: whatever libblas.so.3 is) runs on the
    reference netlib BLAS, not OpenBLAS: its float32 matmuls then run ~50x slower and every
    ratio flatters ember. None when OpenBLAS (or an unknown layout) is in place."""
    if not os.path.exists(libblas):
        return None
    target = os.path.realpath(libblas)
    if "openblas" in target.lower():
        return None
    return (f"WARNING: {libblas} is {target}, not OpenBLAS (install libopenblas0): torch's float32 "
            "matmuls run on the reference BLAS and the ratios below are not a fair comparison")


def torch_env():
    """The environment of the torch children, and a line saying which OPENBLAS_CORETYPE they run."""
    env = dict(os.environ)
    if "OPENBLAS_CORETYPE" in env:
        return env, f"OPENBLAS_CORETYPE={env['OPENBLAS_CORETYPE']} (set by the user)"
    core = openblas_coretype()
    if core is None:
        return env, "OPENBLAS_CORETYPE unset (no AVX2 or AVX-512 flag: OpenBLAS picks its own kernels)"
    env["OPENBLAS_CORETYPE"] = core
    return env, f"OPENBLAS_CORETYPE={core} (from the CPU flags)"


# --- the model of docs/model.md in PyTorch ----------------------------------------------
def load_config(path):
    c = json.load(open(path))
    d = c.setdefault("d_model", 256)
    c.setdefault("vocab_size", 256)
    c.setdefault("n_layers", 4)
    h = c.setdefault("n_heads", 8)
    c.setdefault("n_kv_heads", h)
    c.setdefault("head_dim", d // h)
    act = c.setdefault("ffn_act", "swiglu")
    if "ffn_hidden" not in c:
        c["ffn_hidden"] = 256 * math.ceil((8 * d // 3) / 256) if act in ("swiglu", "geglu") else 4 * d
    for key, default in [("norm", "rmsnorm"), ("norm_eps", 1e-5), ("pos", "rope"), ("rope_theta", 10000.0),
                         ("max_seq_len", 256), ("qk_norm", False), ("bias", False), ("tie_embeddings", True),
                         ("parallel_block", False), ("sliding_window", 0), ("attn_softcap", 0.0),
                         ("final_softcap", 0.0), ("z_loss_coef", 0.0), ("dropout", 0.0), ("moe", None)]:
        c.setdefault(key, default)
    assert c["sliding_window"] == 0 and c["attn_softcap"] == 0 and not c["parallel_block"], \
        "this script covers the shipped presets only"
    if c["moe"] is not None:
        m = c["moe"]
        for key, default in [("n_experts", 8), ("top_k", 2), ("expert_hidden", c["ffn_hidden"]), ("n_shared", 0),
                             ("norm_topk_prob", True), ("every", 1), ("aux_loss_coef", 0.01),
                             ("router_z_loss_coef", 0.0)]:
            m.setdefault(key, default)
    return c


def build_model(c):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, dim, eps):
            super().__init__()
            self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def norm(dim):
        return RMSNorm(dim, c["norm_eps"]) if c["norm"] == "rmsnorm" else nn.LayerNorm(dim, eps=c["norm_eps"])

    def rotate_half(x):
        half = x.shape[-1] // 2
        return torch.cat((-x[..., half:], x[..., :half]), dim=-1)

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            d, hq, hkv, dh, b = c["d_model"], c["n_heads"], c["n_kv_heads"], c["head_dim"], c["bias"]
            self.hq, self.hkv, self.dh = hq, hkv, dh
            self.q_proj, self.k_proj = nn.Linear(d, hq * dh, bias=b), nn.Linear(d, hkv * dh, bias=b)
            self.v_proj, self.o_proj = nn.Linear(d, hkv * dh, bias=b), nn.Linear(hq * dh, d, bias=b)
            if c["qk_norm"]:
                self.q_norm, self.k_norm = RMSNorm(dh, c["norm_eps"]), RMSNorm(dh, c["norm_eps"])

        def forward(self, x, cos, sin):
            B, T, _ = x.shape
            q = self.q_proj(x).view(B, T, self.hq, self.dh)
            k = self.k_proj(x).view(B, T, self.hkv, self.dh)
            v = self.v_proj(x).view(B, T, self.hkv, self.dh)
            if c["qk_norm"]:
                q, k = self.q_norm(q), self.k_norm(k)
            if cos is not None:  # rotate-half RoPE on q and k
                q = q * cos + rotate_half(q) * sin
                k = k * cos + rotate_half(k) * sin
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, dh]
            if self.hkv != self.hq:  # query head j reads kv head j / (hq / hkv)
                k = k.repeat_interleave(self.hq // self.hkv, dim=1)
                v = v.repeat_interleave(self.hq // self.hkv, dim=1)
            if hasattr(F, "scaled_dot_product_attention"):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:  # torch < 2.0: the explicit softmax form
                s = (q @ k.transpose(-2, -1)) / math.sqrt(self.dh)
                mask = torch.ones(T, T, dtype=torch.bool).triu(1)
                o = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
            return self.o_proj(o.transpose(1, 2).reshape(B, T, self.hq * self.dh))

    class FFN(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            d, b, self.act = c["d_model"], c["bias"], c["ffn_act"]
            if self.act in ("swiglu", "geglu"):
                self.gate_proj = nn.Linear(d, hidden, bias=b)
            self.up_proj, self.down_proj = nn.Linear(d, hidden, bias=b), nn.Linear(hidden, d, bias=b)

        def forward(self, x):
            up = self.up_proj(x)
            if self.act == "swiglu":
                h = F.silu(self.gate_proj(x)) * up
            elif self.act == "geglu":
                h = F.gelu(self.gate_proj(x)) * up
            elif self.act == "gelu":
                h = F.gelu(up)
            elif self.act == "gelu_tanh":
                h = F.gelu(up, approximate="tanh")
            else:
                h = F.relu(up)
            return self.down_proj(h)

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            m = c["moe"]
            self.m = m
            self.gate = nn.Linear(c["d_model"], m["n_experts"], bias=False)
            self.experts = nn.ModuleList(FFN(m["expert_hidden"]) for _ in range(m["n_experts"]))
            self.shared_experts = nn.ModuleList(FFN(m["expert_hidden"]) for _ in range(m["n_shared"]))

        def forward(self, x, aux):
            shape, E, K = x.shape, self.m["n_experts"], self.m["top_k"]
            xf = x.reshape(-1, shape[-1])
            N = xf.shape[0]
            logits = self.gate(xf)
            probs = torch.softmax(logits, dim=-1)
            top_p, top_idx = torch.topk(probs, K, dim=-1)
            if self.m["norm_topk_prob"]:
                top_p = top_p / top_p.sum(-1, keepdim=True)
            y = torch.zeros_like(xf)
            flat_idx, flat_w = top_idx.reshape(-1), top_p.reshape(-1)
            counts = torch.bincount(flat_idx, minlength=E)
            for e in range(E):
                picks = (flat_idx == e).nonzero(as_tuple=True)[0]
                if picks.numel() == 0:
                    continue
                rows = picks // K
                y.index_add_(0, rows, (self.experts[e](xf[rows]) * flat_w[picks].unsqueeze(1)).to(y.dtype))  # autocast: bf16 -> y
            for s in self.shared_experts:
                y = y + s(xf)
            f = (counts.float() / (N * K)).detach()
            aux.append((E * (f * probs.mean(0)).sum(), (torch.logsumexp(logits, -1) ** 2).mean()))
            return y.reshape(shape)

    class Block(nn.Module):
        def __init__(self, i):
            super().__init__()
            self.input_layernorm, self.post_attention_layernorm = norm(c["d_model"]), norm(c["d_model"])
            self.self_attn = Attention()
            m = c["moe"]
            self.is_moe = m is not None and i % m["every"] == m["every"] - 1
            self.mlp = MoE() if self.is_moe else FFN(c["ffn_hidden"])

        def forward(self, x, cos, sin, aux):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            h = self.post_attention_layernorm(x)
            return x + (self.mlp(h, aux) if self.is_moe else self.mlp(h))

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            d = c["d_model"]
            self.embed_tokens = nn.Embedding(c["vocab_size"], d)
            if c["pos"] == "learned":
                self.embed_positions = nn.Embedding(c["max_seq_len"], d)
            self.layers = nn.ModuleList(Block(i) for i in range(c["n_layers"]))
            self.norm = norm(d)
            if not c["tie_embeddings"]:
                self.lm_head = nn.Linear(d, c["vocab_size"], bias=False)
            dh = c["head_dim"]
            inv_freq = c["rope_theta"] ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
            angles = torch.arange(c["max_seq_len"], dtype=torch.float64)[:, None] * inv_freq[None, :]
            angles = torch.cat((angles, angles), dim=-1)  # [S, dh]: pair i and i + dh/2 share an angle
            self.register_buffer("cos", angles.cos().float()[None, :, None, :], persistent=False)
            self.register_buffer("sin", angles.sin().float()[None, :, None, :], persistent=False)
            for name, p in self.named_parameters():
                if p.dim() >= 2:
                    nn.init.normal_(p, 0.0, 0.02)
                elif name.endswith("bias"):
                    nn.init.zeros_(p)

        def forward(self, ids, targets):
            T = ids.shape[1]
            x = self.embed_tokens(ids)
            if c["pos"] == "learned":
                x = x + self.embed_positions(torch.arange(T))
            rope = c["pos"] == "rope"
            cos, sin = (self.cos[:, :T], self.sin[:, :T]) if rope else (None, None)
            aux = []
            for block in self.layers:
                x = block(x, cos, sin, aux)
            h = self.norm(x)
            logits = h @ self.embed_tokens.weight.t() if c["tie_embeddings"] else self.lm_head(h)
            if c["final_softcap"] > 0:
                logits = torch.tanh(logits / c["final_softcap"]) * c["final_softcap"]
            logits = logits.reshape(-1, c["vocab_size"])
            ce = F.cross_entropy(logits, targets.reshape(-1))
            total = ce
            if c["z_loss_coef"] > 0:
                total = total + c["z_loss_coef"] * (torch.logsumexp(logits, -1) ** 2).mean()
            if aux:
                m = c["moe"]
                total = total + m["aux_loss_coef"] * torch.stack([a for a, _ in aux]).mean()
                if m["router_z_loss_coef"] > 0:
                    total = total + m["router_z_loss_coef"] * torch.stack([z for _, z in aux]).mean()
            return ce, total

    return Transformer()


def vm_hwm_mb():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def torch_child(name, B, T, steps, warmup, threads, dtype):
    """Runs in a subprocess: prints one JSON line with the torch figures."""
    import contextlib
    import torch
    torch.set_num_threads(threads)
    torch.manual_seed(1337)
    c = load_config(os.path.join(ROOT, "configs", MODEL.get(name, name) + ".json"))
    model = build_model(c)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    times = []
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        ids = torch.randint(0, c["vocab_size"], (B, T + 1))
        opt.zero_grad(set_to_none=True)
        # bf16: torch's CPU autocast (matmuls in bfloat16, float32 weights), as ember --dtype bf16
        mixed = torch.autocast("cpu", dtype=torch.bfloat16) if dtype == "bf16" else contextlib.nullcontext()
        with mixed:
            ce, total = model(ids[:, :T], ids[:, 1:])
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        dt = time.perf_counter() - t0
        assert math.isfinite(ce.item())
        if s >= warmup:
            times.append(dt * 1e3)
    print(json.dumps({"ms_per_step_median": statistics.median(times), "ms_per_step_best": min(times),
                      "peak_rss_mb": vm_hwm_mb(), "torch": torch.__version__, "threads": torch.get_num_threads()}))


def run_torch(name, B, T, args):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-child", name, str(B), str(T),
                          str(args.steps), str(args.warmup), str(args.threads), args.torch_dtype],
                         check=True, capture_output=True, text=True, env=args.torch_env).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_ember(name, args):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "bench.json")
        subprocess.run([args.ember, "bench", "--preset", name, "--steps", str(args.steps), "--warmup",
                        str(args.warmup), "--threads", str(args.threads), "--dtype", args.dtype, "--json", path],
                       check=True, stdout=subprocess.DEVNULL)
        report = json.load(open(path))
    cfg = report["configs"][0]
    cfg["matmul_peak_gflops"] = report["matmul_peak_gflops"]
    cfg["floor_peak"] = report["floor_peak"]
    return cfg


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-child":
        name, B, T, steps, warmup, threads = sys.argv[2], *map(int, sys.argv[3:8])
        torch_child(name, B, T, steps, warmup, threads, sys.argv[8])
        return
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ember", default=os.path.join(ROOT, "build", "apps", "ember"))
    p.add_argument("--preset", action="append", choices=list(SHAPES),
                   help="repeatable; default dense-small, moe-small, gpt2-small (gpt2-small-1024: B 8, T 1024)")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=1, help="interleaved repetitions; each side's best median counts")
    p.add_argument("--dtype", choices=["float32", "bf16"], default="float32",
                   help="ember's matmul precision (ember bench --dtype); MFU is then against the bf16 peak")
    p.add_argument("--torch-dtype", choices=["float32", "bf16"],
                   help="torch's: float32, or bf16 under torch.autocast('cpu'); default: --dtype")
    args = p.parse_args()
    args.torch_dtype = args.torch_dtype or args.dtype
    args.torch_env, coretype_line = torch_env()
    print(f"torch side: {coretype_line}", flush=True)
    warning = blas_warning()
    if warning:
        print(warning, flush=True)
    presets = args.preset or DEFAULT_PRESETS
    results = {}
    for r in range(args.rounds):
        for name in presets:
            B, T = SHAPES[name]
            first_torch = r % 2 == 0
            runs = [("torch", lambda: run_torch(name, B, T, args)), ("ember", lambda: run_ember(name, args))]
            for side, fn in (runs if first_torch else runs[::-1]):
                res = fn()
                print(f"round {r + 1} {name:12s} {side:5s} {res['ms_per_step_median']:9.1f} ms/step "
                      f"(best {res['ms_per_step_best']:.1f}), peak RSS {res['peak_rss_mb']:.0f} MB", flush=True)
                prev = results.get((name, side))
                if prev is None or res["ms_per_step_median"] < prev["ms_per_step_median"]:
                    results[(name, side)] = dict(res)
                if side == "ember":  # the floor: the highest floor peak of the rounds (the least disturbed)
                    best = max([res] + ([prev] if prev else []), key=lambda x: x["floor_peak_gflops"])
                    results[(name, side)].update(floor_ms=best["floor_ms"], floor_peak_gflops=best["floor_peak_gflops"])
                # peak RSS: the largest of the rounds (each is its own process)
                results[(name, side)]["peak_rss_mb"] = max(res["peak_rss_mb"], (prev or res)["peak_rss_mb"])

    def mark(ok):
        return "met" if ok else "NOT met"

    print(f"\nember {args.dtype}, torch {args.torch_dtype}; "
          f"{args.threads} threads, {args.steps} timed steps after {args.warmup} warm-up, best median of "
          f"{args.rounds} interleaved round(s); MFU = model FLOPs (ember's nn::model_stats) / ember's matmul peak"
          + (f" ({', '.join(sorted(CAUSAL_MFU & set(presets)))}: causal attention as half the T x T square)"
             if CAUSAL_MFU & set(presets) else "") + f"; torch: {coretype_line}")
    head = (f"{'config':12s} {'B':>2s} {'T':>4s} {'ember ms':>9s} {'torch ms':>9s} {'ratio':>6s} {'ember MFU':>9s} "
            f"{'torch MFU':>9s} {'ember RSS':>9s} {'torch RSS':>9s} {'floor ms':>8s} {'floor/torch':>11s}  targets")
    print(head)
    print("-" * len(head) + "-" * 40)
    for name in presets:
        e, t = results[(name, "ember")], results[(name, "torch")]
        B, T = SHAPES[name]
        flops = e["causal_flops_per_token" if name in CAUSAL_MFU else "flops_per_token"] * B * T
        peak = e["matmul_peak_gflops"] * 1e9
        e_ms, t_ms = e["ms_per_step_median"], t["ms_per_step_median"]
        e_mfu, t_mfu = 100 * flops / (e_ms / 1e3) / peak, 100 * flops / (t_ms / 1e3) / peak
        ratio = e_ms / t_ms
        targets = [f"ratio <= {RATIO_TARGET[name]}: {mark(ratio <= RATIO_TARGET[name])}"]
        if name in MFU_TARGET:
            targets.append(f"MFU >= {MFU_TARGET[name]:.0f}%: {mark(e_mfu >= MFU_TARGET[name])}")
        targets.append(f"RSS < torch: {mark(e['peak_rss_mb'] < t['peak_rss_mb'])}")
        print(f"{name:12s} {B:2d} {T:4d} {e_ms:9.1f} {t_ms:9.1f} {ratio:6.2f} {e_mfu:8.1f}% {t_mfu:8.1f}% "
              f"{e['peak_rss_mb']:6.0f} MB {t['peak_rss_mb']:6.0f} MB {e['floor_ms']:8.1f} {e['floor_ms'] / t_ms:11.2f}  "
              + "; ".join(targets))
    fma = ", ".join(f"{n} {results[(n, 'ember')]['floor_peak_gflops']:.1f}" for n in presets)
    print(f"floor ms: the step's FLOPs (causal attention as half the T x T square) at the "
          f"{results[(presets[0], 'ember')]['floor_peak']} peak (GFLOP/s: {fma}); "
          "floor/torch is the smallest ember/torch ratio this machine allows, even if every FLOP ran at that peak")
    for name in presets:
        floor, t_ms = results[(name, "ember")]["floor_ms"], results[(name, "torch")]["ms_per_step_median"]
        print(f"  {name}: ratio <= {RATIO_TARGET[name]} means {RATIO_TARGET[name] * t_ms:.1f} ms/step, which needs "
              f"{100 * floor / (RATIO_TARGET[name] * t_ms):.0f}% of that peak over the whole step")
    peaks = ", ".join(f"{n} {results[(n, 'ember')]['matmul_peak_gflops']:.1f}" for n in presets)
    print(f"{args.dtype} matmul peak (GFLOP/s, measured by each counted ember run, used for both MFUs): {peaks}; "
          f"torch {results[(presets[0], 'torch')]['torch']}")
    if warning:
        print(warning)


if __name__ == "__main__":
    main()
