#!/usr/bin/python3
"""Independent float64 PyTorch implementation of docs/model.md#preference-optimisation-and-reward-models
and docs/formats.md#preference-data-jsonl (the sides of a pair); the job: docs/align.md.

Written from the contract alone (not from ember's C++), so that comparing the two checks both:
preference pairs in both forms (chat messages rendered in ChatML, plain text with
<|endoftext|>) cut to T+1 tokens, their scored tokens and the dropped pairs; logp and n per
side; the pair losses dpo (with label smoothing), ipo, simpo and orpo, the sft weight and the
logged rewards/chosen, rewards/rejected, rewards/margins, rewards/accuracy; reference log-probs
computed once (from --ref, else the starting model: for LoRA the base without adapters);
AdamW + schedule + clipping on the trained tensors (LoRA adapters or every weight) over
sequential steps with accumulation; and the reward model (score head on the final-norm
output at a side's last token, Bradley-Terry loss with margin and centring). The model math,
the tokenizer, ChatML and LoRA come from spec_reference.py and finetune_reference.py.
Dropout 0, no NF4.

  /usr/bin/python3 tools/align_reference.py [--self-test]       hand-computed values, gradchecks
  /usr/bin/python3 tools/align_reference.py --base CKPT --data PAIRS --out-json FILE [options]
      replays `ember align` (or with --reward, `ember reward`) in float64 and writes one JSON
      line per step with ember's metrics.jsonl keys (run it with --help for the options).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_reference as ft  # noqa: E402  (also routes spec_reference's linear through LoRA)
import spec_reference as ref  # noqa: E402

LOSSES = ("dpo", "ipo", "simpo", "orpo")
DEFAULT_BETA = {"dpo": 0.1, "ipo": 0.1, "simpo": 2.0, "orpo": 0.1}

# ----------------------------------------------------------------------------
# Preference data: sides, the cut, scored tokens, dropped pairs


def render_side(tok, line, side):
    """(ids, completion flags) of one side of a pair line, before the cut."""
    prompt, answer = line["prompt"], line[side]
    if isinstance(prompt, str):  # text form: encode(prompt), encode(completion), <|endoftext|>
        assert isinstance(answer, str), f"{side}: a text-form pair needs a string"
        p, a = tok.encode(prompt), tok.encode(answer) + [tok.special_id(ft.EOT)]
        return p + a, [False] * len(p) + [True] * len(a)
    assert prompt and prompt[-1]["role"] == "user", "the prompt must end with a user message"
    assert len(answer) == 1 and answer[0]["role"] == "assistant", f"{side}: one assistant message"
    p, _ = ft.render(tok, {"messages": prompt})  # earlier assistant turns are not scored
    a, labels = ft.render(tok, {"messages": answer})  # labels: content tokens and <|im_end|>
    return p + a, [False] * len(p) + labels


def cut_side(ids, completion, T):
    """First T+1 tokens; scored[i] = 1 for a completion token with a position before it (i >= 1)."""
    ids, completion = ids[:T + 1], completion[:T + 1]
    return ids, [1 if (i >= 1 and f) else 0 for i, f in enumerate(completion)]


def render_pairs(tok, lines, T):
    """Rendered pairs [{chosen: (ids, scored), rejected: ..., margin}] and the number dropped."""
    pairs, dropped = [], 0
    for line in lines:
        sides = {s: cut_side(*render_side(tok, line, s), T) for s in ("chosen", "rejected")}
        if any(sum(sc) == 0 for _, sc in sides.values()):
            dropped += 1
            continue
        pairs.append(dict(sides, margin=float(line.get("margin", 0.0))))
    if not pairs:
        raise ValueError(f"all {dropped} pairs dropped: no side has a scored token within T + 1 = {T + 1}")
    return pairs, dropped


def micro_batch_pairs(pairs, s, u, B, A, W=1, r=0):
    """Pairs of micro-step u of step s on rank r: pair ((s*A + u)*W + r)*B + b mod n (sequential order)."""
    return [pairs[(((s * A + u) * W + r) * B + b) % len(pairs)] for b in range(B)]


# ----------------------------------------------------------------------------
# Forward: final-norm output, per-side log-probs, reward scores


def side_rows(sides, T):
    """Rows of sides (ids, scored): inputs [B, T], targets [B, T], scored targets [B, T], real lengths."""
    B = len(sides)
    inp = torch.zeros(B, T, dtype=torch.int64)
    tgt = torch.zeros(B, T, dtype=torch.int64)
    mask = torch.zeros(B, T, dtype=torch.float64)
    n_real = []
    for b, (ids, scored) in enumerate(sides):
        n = len(ids)
        inp[b, :min(n, T)] = torch.tensor(ids[:min(n, T)])
        tgt[b, :n - 1] = torch.tensor(ids[1:], dtype=torch.int64)
        mask[b, :n - 1] = torch.tensor(scored[1:], dtype=torch.float64)
        n_real.append(min(n, T))
    return inp, tgt, mask, n_real


def final_hidden(c, P, inp, n_real):
    """Final-norm output [B, T, d]; MoE layers route the real tokens only (no aux terms here)."""
    T = inp.shape[1]
    x = P["model.embed_tokens.weight"][inp]
    if c["pos"] == "learned":
        x = x + P["model.embed_positions.weight"][:T]
    elif c["pos"] == "sinusoidal":
        x = x + ref.sinusoidal(T, c["d_model"])
    real = torch.tensor([[j < n for j in range(T)] for n in n_real])
    for i in range(c["n_layers"]):
        p = f"model.layers.{i}"

        def mlp(h):
            if not ref.is_moe_layer(c, i):
                return ref.ffn(c, P, p + ".mlp", h)
            y = ref.moe(c, P, p + ".mlp", h[real][None])[0]
            return torch.zeros_like(h).index_put((real,), y[0])

        if c["parallel_block"]:
            h = ref.apply_norm(c, P, p + ".input_layernorm", x)
            x = x + ref.attention(c, P, p + ".self_attn", h, i) + mlp(h)
        else:
            x = x + ref.attention(c, P, p + ".self_attn", ref.apply_norm(c, P, p + ".input_layernorm", x), i)
            x = x + mlp(ref.apply_norm(c, P, p + ".post_attention_layernorm", x))
    return ref.apply_norm(c, P, "model.norm", x)


def logits_of(c, P, x):
    head = P["model.embed_tokens.weight"] if c["tie_embeddings"] else P["lm_head.weight"]
    logits = x @ head.t()
    if "lm_head.lora_A.weight" in P:
        logits = logits + P.lora_scale * ((x @ P["lm_head.lora_A.weight"].t()) @ P["lm_head.lora_B.weight"].t())
    fc = c["final_softcap"]
    return fc * torch.tanh(logits / fc) if fc > 0 else logits


def side_logps(c, P, sides, T):
    """logp [B] (sum over scored tokens of log softmax(z_{t-1})[x_t]) and n [B] (their count)."""
    inp, tgt, mask, n_real = side_rows(sides, T)
    logp_all = torch.log_softmax(logits_of(c, P, final_hidden(c, P, inp, n_real)), dim=-1)
    tok_logp = logp_all.gather(-1, tgt[..., None]).squeeze(-1)
    return (tok_logp * mask).sum(-1), mask.sum(-1)


def side_scores(c, P, sides, T):
    """r [B]: score.weight applied to the final-norm output at each side's last input position.

    A side of T+1 tokens has T input positions: its score is read at position T-1 (the last
    token the model sees); shorter sides at their last token."""
    inp, _, _, n_real = side_rows(sides, T)
    x = final_hidden(c, P, inp, n_real)
    last = x[torch.arange(len(sides)), torch.tensor(n_real) - 1]
    return (last @ P["score.weight"].t()).squeeze(-1)


# ----------------------------------------------------------------------------
# The pair losses and their logged rewards (per pair)


def log1mexp(l):
    """log(1 - exp(l)) for l < 0, stable near 0 and far below it."""
    return torch.where(l > -math.log(2), torch.log(-torch.expm1(l)), torch.log1p(-torch.exp(l)))


def pair_losses(loss, s, beta, label_smoothing=0.0, gamma=0.5, sft_weight=0.0):
    """Per-pair loss [B] and rewards (chosen [B], rejected [B]) from the per-side sums
    s = dict(lc, lr, nc, nr, rc, rr): policy logp, counts and reference logp of each side."""
    lc, lr_, nc, nr = s["lc"], s["lr"], s["nc"], s["nr"]
    mc, mr = lc / nc, lr_ / nr  # per-token means l_c, l_r
    if loss == "dpo":
        h = (lc - s["rc"]) - (lr_ - s["rr"])
        e = label_smoothing
        out = -(1 - e) * F.logsigmoid(beta * h) - e * F.logsigmoid(-beta * h)
    elif loss == "ipo":
        hp = (lc - s["rc"]) / nc - (lr_ - s["rr"]) / nr
        out = (hp - 1 / (2 * beta)) ** 2
    elif loss == "simpo":
        out = -F.logsigmoid(beta * (mc - mr) - gamma)
    elif loss == "orpo":
        out = -mc - beta * F.logsigmoid((mc - mr) - (log1mexp(mc) - log1mexp(mr)))
    else:
        raise ValueError(f"unknown loss {loss}")
    out = out + sft_weight * (-mc)
    if loss in ("simpo", "orpo"):
        return out, beta * mc, beta * mr
    return out, beta * (lc - s["rc"]), beta * (lr_ - s["rr"])


def reward_losses(rc, rr, margin, center):
    """Bradley-Terry per pair: -log sigmoid(r_c - r_r - m) + c (r_c + r_r)^2."""
    return -F.logsigmoid(rc - rr - margin) + center * (rc + rr) ** 2


def reward_metrics(rew_c, rew_r):
    d = rew_c - rew_r
    return {"rewards/chosen": rew_c.mean().item(), "rewards/rejected": rew_r.mean().item(),
            "rewards/margins": d.mean().item(), "rewards/accuracy": (d > 0).double().mean().item()}


# ----------------------------------------------------------------------------
# Steps: reference log-probs, AdamW over the trained tensors


def reference_logps(c, P_ref, pairs, T, batch=8):
    """ref logp of (chosen, rejected) per pair, once, without gradients (None for simpo/orpo)."""
    out = []
    with torch.no_grad():
        for i in range(0, len(pairs), batch):
            chunk = pairs[i:i + batch]
            rc, _ = side_logps(c, P_ref, [p["chosen"] for p in chunk], T)
            rr, _ = side_logps(c, P_ref, [p["rejected"] for p in chunk], T)
            out += list(zip(rc.tolist(), rr.tolist()))
    return out


def sums_of(c, P, mb, T, ref_of):
    lc, nc = side_logps(c, P, [p["chosen"] for p in mb], T)
    lr_, nr = side_logps(c, P, [p["rejected"] for p in mb], T)
    refs = [ref_of(p) for p in mb]
    return dict(lc=lc, lr=lr_, nc=nc, nr=nr, rc=torch.tensor([r[0] for r in refs], dtype=torch.float64),
                rr=torch.tensor([r[1] for r in refs], dtype=torch.float64))


def align_step_loss(c, P, mbs, T, loss, beta, ref_of, **kw):
    """Mean over every pair of the step's micro-batches (all micro-steps and ranks): loss and metrics."""
    losses, rew_c, rew_r = [], [], []
    for mb in mbs:
        out, a, b = pair_losses(loss, sums_of(c, P, mb, T, ref_of), beta, **kw)
        losses.append(out)
        rew_c.append(a.detach())
        rew_r.append(b.detach())
    total = torch.cat(losses).mean()
    metrics = dict(loss=total.item(), **reward_metrics(torch.cat(rew_c), torch.cat(rew_r)))
    return total, metrics


def reward_step_loss(c, P, mbs, T, center):
    losses, diffs = [], []
    for mb in mbs:
        rc = side_scores(c, P, [p["chosen"] for p in mb], T)
        rr = side_scores(c, P, [p["rejected"] for p in mb], T)
        m = torch.tensor([p["margin"] for p in mb], dtype=torch.float64)
        losses.append(reward_losses(rc, rr, m, center))
        diffs.append((rc - rr).detach())
    total, d = torch.cat(losses).mean(), torch.cat(diffs)
    return total, {"loss": total.item(), "accuracy": (d > 0).double().mean().item(), "margin": d.mean().item()}


def evaluate(c, P, pairs, T, loss, beta, refs=None, **kw):
    """Metrics over held-out pairs (as logged at evaluation); refs: their reference logps (dpo, ipo)."""
    ref_of = (lambda p: refs[pairs.index(p)]) if refs is not None else (lambda p: (0.0, 0.0))
    with torch.no_grad():
        return align_step_loss(c, P, [pairs], T, loss, beta, ref_of, **kw)[1]


def evaluate_reward(c, P, pairs, T, center=0.0):
    with torch.no_grad():
        return reward_step_loss(c, P, [pairs], T, center)[1]


def adamw(P, names, state, g, a, wd, t, b1=0.9, b2=0.95, eps=1e-8):
    """docs/model.md#optimizer on the named tensors; decay on tensors of 2 or more dimensions."""
    with torch.no_grad():
        for k in names:
            p = P[k]
            if p.dim() >= 2:
                p.mul_(1.0 - a * wd)
            m, v = state.setdefault(k, (torch.zeros_like(p), torch.zeros_like(p)))
            m.mul_(b1).add_((1 - b1) * g[k])
            v.mul_(b2).add_((1 - b2) * g[k] ** 2)
            p.sub_((a / (1 - b1 ** t)) * m / (v.sqrt() / math.sqrt(1 - b2 ** t) + eps))


def train(c, P, names, pairs, T, steps, B, A, opt, step_loss, W=1):
    """`steps` sequential steps of AdamW on P[names]; per step the metrics (and grad_norm, lr)."""
    state, log = {}, []
    for s in range(steps):
        for k in names:
            P[k].grad = None
        mbs = [micro_batch_pairs(pairs, s, u, B, A, W, r) for u in range(A) for r in range(W)]
        total, metrics = step_loss(P, mbs)
        total.backward()
        g = {k: P[k].grad if P[k].grad is not None else torch.zeros_like(P[k]) for k in names}
        norm = math.sqrt(sum((gg ** 2).sum().item() for gg in g.values()))
        if opt["clip"] > 0:
            g = {k: gg * min(1.0, opt["clip"] / (norm + 1e-6)) for k, gg in g.items()}
        a = ref.lr_at(s, opt["lr"], opt["min_lr"], opt["warmup"], steps)
        adamw(P, names, state, g, a, opt["wd"], s + 1)
        log.append(dict(metrics, step=s + 1, grad_norm=norm, lr=a))
    return log


def make_params(base, trained, scale, full):
    """Params with base weights (trainable with full) and the trained extras (adapters, score head)."""
    P = ft.to_params(base, trained, scale)
    if full:
        for k in base:
            P[k].requires_grad_(True)
    names = list(base) + list(trained) if full else list(trained)
    return P, names


def align(c, base, adapters, pairs, T, steps, B, A, opt, loss, beta=None, ref_model=None, scale=2.0,
          full=False, W=1, **kw):
    """`ember align` in float64; returns (P after the steps, per-step metrics, reference logps).

    ref_model: (params, adapters, lora scale) of --ref; default the starting model without adapters."""
    beta = DEFAULT_BETA[loss] if beta is None else beta
    P, names = make_params(base, adapters, scale, full)
    refs = None
    if loss in ("dpo", "ipo"):
        P_ref = ft.to_params(*(ref_model or (base, {}, 0.0)))
        refs = reference_logps(c, P_ref, pairs, T)
    index = {id(p): i for i, p in enumerate(pairs)}
    ref_of = (lambda p: refs[index[id(p)]]) if refs is not None else (lambda p: (0.0, 0.0))
    log = train(c, P, names, pairs, T, steps, B, A, opt,
                lambda P_, mbs: align_step_loss(c, P_, mbs, T, loss, beta, ref_of, **kw), W)
    return P, log, refs


def reward(c, base, head, adapters, pairs, T, steps, B, A, opt, center=0.0, scale=2.0, full=False, W=1):
    """`ember reward` in float64: score head (always trained) plus adapters or every weight."""
    P, names = make_params(base, dict(adapters, **{"score.weight": head}), scale, full)
    log = train(c, P, names, pairs, T, steps, B, A, opt, lambda P_, mbs: reward_step_loss(c, P_, mbs, T, center), W)
    return P, log


# ----------------------------------------------------------------------------
# Self-test: hand-computed values, gradchecks, identities


def t64(*xs):
    return [torch.tensor(x, dtype=torch.float64) for x in xs]


def sums(lc, lr_, nc, nr, rc=0.0, rr=0.0):
    return dict(zip(("lc", "lr", "nc", "nr", "rc", "rr"), t64([lc], [lr_], [nc], [nr], [rc], [rr])))


def close(a, b, tol=1e-12):
    a = a.item() if torch.is_tensor(a) else a
    assert abs(a - b) <= tol * max(1.0, abs(b)), (a, b)


def test_rendering():
    tok = ft.Tokenizer(ft.tokenizer_json())
    S, E, NL, EOT = 257, 258, 10, 256
    b = lambda s: list(s.encode())  # noqa: E731
    line = {"prompt": [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": "2"},
                       {"role": "user", "content": "2+2?"}],
            "chosen": [{"role": "assistant", "content": "4"}], "rejected": [{"role": "assistant", "content": "5"}]}
    ids, comp = render_side(tok, line, "chosen")
    prompt = [S] + b("user\n1+1?") + [E, NL, S] + b("assistant\n2") + [E, NL, S] + b("user\n2+2?") + [E, NL]
    assert ids == prompt + [S] + b("assistant\n4") + [E, NL], ids
    assert [i for i, f in enumerate(comp) if f] == [len(prompt) + 11, len(prompt) + 12], comp  # "4", <|im_end|>
    text = {"prompt": "ab", "chosen": "c<|im_end|>", "rejected": "dd", "margin": 0.5}
    ids, comp = render_side(tok, text, "chosen")
    assert ids == [97, 98, 99, E, EOT] and comp == [False, False, True, True, True], (ids, comp)
    # the cut: T + 1 tokens, scored = completion tokens with a position before them
    assert cut_side([1, 2, 3, 4, 5], [True, False, True, True, True], 3) == ([1, 2, 3, 4], [0, 0, 1, 1])
    pairs, dropped = render_pairs(tok, [text, dict(text, prompt="abcdefgh")], 4)
    assert dropped == 1 and len(pairs) == 1 and pairs[0]["margin"] == 0.5  # prompt fills the window: dropped
    assert render_pairs(tok, [line], 64)[1] == 0 and render_pairs(tok, [text, line], 15)[1] == 1
    assert pairs[0]["rejected"] == ([97, 98, 100, 100, EOT], [0, 0, 1, 1, 1]), pairs[0]["rejected"]
    try:
        render_pairs(tok, [dict(text, prompt="abcdefgh")], 4)
        raise AssertionError("all dropped must be an error")
    except ValueError:
        pass
    print("ok rendering: chat form (earlier assistant turns unscored), text form with <|endoftext|>,"
          " cut at T+1, dropped pairs, all dropped is an error")


def test_losses_by_hand():
    log2 = math.log(2.0)
    out, a, b = pair_losses("dpo", sums(-5, -7, 2, 3, -5, -7), 0.1)  # h = 0
    close(out, log2), close(a, 0.0), close(b, 0.0)
    out, _, _ = pair_losses("dpo", sums(-5, -7, 2, 3, -5, -7), 0.1, label_smoothing=0.3)
    close(out, log2)
    h, beta, e = 3.0, 0.5, 0.2  # h = (-4 - -6) - (-9 - -8) = 3
    out, a, b = pair_losses("dpo", sums(-4, -9, 2, 3, -6, -8), beta, label_smoothing=e)
    close(out, (1 - e) * math.log1p(math.exp(-beta * h)) + e * math.log1p(math.exp(beta * h)))
    close(a, beta * 2), close(b, beta * -1)
    beta = 0.1  # ipo: target h' = 1 / (2 beta) gives 0; h' = 0 gives 1 / (4 beta^2)
    close(pair_losses("ipo", sums(-4, -6, 2, 4, -4 - 2 * 5.0, -6), beta)[0], 0.0)
    close(pair_losses("ipo", sums(-4, -6, 2, 4, -4, -6), beta)[0], 25.0)
    close(pair_losses("ipo", sums(-3, -6, 2, 4, -4, -6), beta)[0], (0.5 - 5.0) ** 2)
    out, a, b = pair_losses("simpo", sums(-4, -9, 2, 3), 2.0, gamma=0.5)  # l_c = -2, l_r = -3
    close(out, math.log1p(math.exp(-(2.0 * 1.0 - 0.5)))), close(a, -4.0), close(b, -6.0)
    close(pair_losses("simpo", sums(-4, -6, 2, 3), 2.0, gamma=0.5)[0], math.log1p(math.exp(0.5)))
    # orpo near log-probs 0: log(1 - exp(l)) = log(-l) + log1p(l/2 + l^2/24 ...) ~ log(-l) - ... for tiny l
    lc, lr_ = -1e-12, -1e-3
    odds = lambda l: math.log(-l) + math.log1p(-(-l) / 2 + l * l / 6 - (-l) ** 3 / 24)  # noqa: E731, series of 1-e^l
    z = (lc - lr_) - (odds(lc) - odds(lr_))
    out, a, b = pair_losses("orpo", sums(lc, lr_, 1, 1), 0.1)
    close(out, -lc + 0.1 * math.log1p(math.exp(-z)), 1e-12), close(a, 0.1 * lc), close(b, 0.1 * lr_)
    assert torch.isfinite(pair_losses("orpo", sums(-1e-300, -800.0, 1, 1), 0.1)[0]).all()
    lc, lr_ = -2.0, -6.0  # orpo far from 0: the plain formula
    z = (lc - lr_) - (math.log(1 - math.exp(lc)) - math.log(1 - math.exp(lr_)))
    close(pair_losses("orpo", sums(-4, -18, 2, 3), 0.25)[0], 2.0 + 0.25 * math.log1p(math.exp(-z)))
    # sft weight adds a * (-l_c) to every loss
    for loss in LOSSES:
        s = sums(-4, -9, 2, 3, -5, -8)
        close(pair_losses(loss, s, 0.3, sft_weight=0.7)[0] - pair_losses(loss, s, 0.3)[0], 0.7 * 2.0)
    # metrics: accuracy is strict, margins the mean difference
    m = reward_metrics(*t64([1.0, 2.0, 0.5], [0.0, 2.0, 1.0]))
    close(m["rewards/accuracy"], 1 / 3), close(m["rewards/margins"], (1 + 0 - 0.5) / 3)
    close(m["rewards/chosen"], 3.5 / 3), close(m["rewards/rejected"], 1.0)
    # reward model: r_c = r_r gives log 2; margin and centring
    close(reward_losses(*t64([0.3], [0.3], [0.0]), 0.0), log2)
    close(reward_losses(*t64([1.5], [-0.5], [0.5]), 0.01), math.log1p(math.exp(-1.5)) + 0.01 * 1.0)
    print("ok losses by hand: dpo(h=0) = log 2 with and without smoothing, smoothed dpo, ipo's target,"
          " simpo, orpo near 0 (l_c = -1e-12) and far, sft weight, metrics, Bradley-Terry with m and c")


def fd_check(f, xs, eps=1e-6, tol=1e-7):
    """Central differences of scalar f(*xs) against autograd in float64; returns the worst relative error."""
    xs = [x.clone().requires_grad_(True) for x in xs]
    f(*xs).backward()
    worst = 0.0
    for x in xs:
        for i in range(x.numel()):
            with torch.no_grad():
                x.view(-1)[i] += eps
                up = f(*xs).item()
                x.view(-1)[i] -= 2 * eps
                down = f(*xs).item()
                x.view(-1)[i] += eps
            fd, ag = (up - down) / (2 * eps), 0.0 if x.grad is None else x.grad.view(-1)[i].item()
            err = abs(fd - ag) / max(1e-3, abs(ag))
            assert err < tol, (fd, ag)
            worst = max(worst, err)
    return worst


def test_gradchecks():
    g = torch.Generator().manual_seed(4)
    nc, nr = t64([3.0, 5.0, 2.0], [4.0, 1.0, 6.0])
    worst = {}
    for loss, kw in (("dpo", dict(label_smoothing=0.1, sft_weight=0.3)), ("ipo", {}), ("simpo", dict(gamma=0.5)),
                     ("orpo", dict(sft_weight=0.5))):
        lc, lr_, rc, rr = [-(torch.rand(3, generator=g, dtype=torch.float64) * 3 + 0.05) * n
                           for n in (nc, nr, nc, nr)]
        beta = DEFAULT_BETA[loss]
        f = lambda a, b, c_, d: pair_losses(loss, dict(lc=a, lr=b, nc=nc, nr=nr, rc=c_, rr=d),  # noqa: E731
                                            beta, **kw)[0].mean()
        worst[loss] = fd_check(f, [lc, lr_, rc, rr])
    rc, rr, m = (torch.randn(4, generator=g, dtype=torch.float64) for _ in range(3))
    worst["reward"] = fd_check(lambda a, b: reward_losses(a, b, m, 0.05).mean(), [rc, rr])
    # end to end: the step loss of a small model in the adapters and the score head
    c, base, pairs, T = small_case()
    ad = random_adapters(c, ["q", "v", "head"], 2)
    for loss in LOSSES:
        P_ref = ft.to_params(base, {}, 0.0)
        refs = reference_logps(c, P_ref, pairs, T)
        idx = {id(p): i for i, p in enumerate(pairs)}

        def f(x, loss=loss):
            P = ft.to_params(base, dict(ad, **{"model.layers.1.self_attn.q_proj.lora_B.weight": 0}), 2.0)
            P["model.layers.1.self_attn.q_proj.lora_B.weight"] = x
            return align_step_loss(c, P, [pairs[:2], pairs[2:4]], T, loss, DEFAULT_BETA[loss],
                                   lambda p: refs[idx[id(p)]])[0]
        worst[loss + " model"] = fd_check(f, [torch.tensor(ad["model.layers.1.self_attn.q_proj.lora_B.weight"])],
                                          eps=1e-5, tol=1e-6)

    def fr(w):
        P = ft.to_params(base, {}, 0.0)
        P["score.weight"] = w
        return reward_step_loss(c, P, [pairs[:3]], T, 0.02)[0]
    worst["score head"] = fd_check(fr, [torch.randn(1, c["d_model"], generator=g, dtype=torch.float64) * 0.02],
                                   eps=1e-5, tol=1e-6)
    print("ok float64 finite differences = autograd: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))


WORDS = ["the", " cat", " sat", " on", " mat", "?", " yes", " no", "\n"]


def small_case(seed=1, moe=False, T=32):
    """A random model over a byte tokenizer with the ChatML tokens, and rendered pairs of varied lengths."""
    raw = dict(vocab_size=259, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=24, qk_norm=True,
               max_seq_len=T, tie_embeddings=not moe, bias=moe)
    if moe:
        raw["moe"] = dict(n_experts=3, top_k=2, expert_hidden=12, n_shared=1)
    c = ref.resolve_config(raw)
    base = ref.random_params(c, seed=seed, std=0.3)
    tok = ft.Tokenizer(ft.tokenizer_json())
    rng = np.random.default_rng(seed)
    say = lambda k: "".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=k))  # noqa: E731
    lines = []
    for k in (1, 2, 1, 3, 1, 2):  # short chat pairs, text pairs, and one cut at T+1
        if k == 2:
            lines.append({"prompt": say(1), "chosen": say(1), "rejected": say(2), "margin": 0.5})
        else:
            lines.append({"prompt": [{"role": "user", "content": say(k)}],
                          "chosen": [{"role": "assistant", "content": say(1)}],
                          "rejected": [{"role": "assistant", "content": say(k)}]})
    pairs, _ = render_pairs(tok, lines, T)
    return c, base, pairs, T


def random_adapters(c, targets, r, seed=5):
    ad = ft.init_adapters(c, targets, r)
    rng = np.random.default_rng(seed)
    return {k: rng.normal(0, 0.2, size=v.shape) if k.endswith("lora_B.weight") else v for k, v in ad.items()}


def test_logps_and_identities():
    c, base, pairs, T = small_case()
    assert any(len(p["rejected"][0]) == T + 1 for p in pairs), "a side cut at T + 1"
    P = ft.to_params(base, random_adapters(c, ["q", "v"], 2), 2.0)
    sides = [p[s] for p in pairs for s in ("chosen", "rejected")]
    lp, n = side_logps(c, P, sides, T)
    for k, (ids, scored) in enumerate(sides):  # by hand: one side alone, a plain loop over its positions
        L = min(len(ids), T)
        inp = torch.tensor([ids[:L]])
        logits = logits_of(c, P, final_hidden(c, P, inp, [L]))[0]
        want = sum(torch.log_softmax(logits[t - 1], -1)[ids[t]].item() for t in range(1, len(ids)) if scored[t])
        close(lp[k], want, 1e-12), close(n[k], sum(scored))
    for moe in (False, True):  # accumulation: (B 4, A 1) == (B 2, A 2), every loss
        c, base, pairs, T = small_case(moe=moe)
        ad = random_adapters(c, ["q", "v", "gate", "head"], 2)
        opt = dict(lr=1e-2, min_lr=1e-3, warmup=1, wd=0.1, clip=1.0)
        for loss in LOSSES:
            _, l1, _ = align(c, base, ad, pairs, T, 2, 4, 1, opt, loss)
            _, l2, _ = align(c, base, ad, pairs, T, 2, 2, 2, opt, loss)
            for a, b in zip(l1, l2):
                assert all(abs(a[k] - b[k]) < 1e-12 for k in a), (loss, a, b)
    # start of LoRA training: B = 0 so the policy is the reference; step 1 by hand
    c, base, pairs, T = small_case()
    ad = ft.init_adapters(c, ["q", "k", "v", "o", "head"], 4)
    opt = dict(lr=1e-2, min_lr=1e-3, warmup=2, wd=0.0, clip=0.0)
    P0 = ft.to_params(base, {}, 0.0)
    lc, nc = side_logps(c, P0, [p["chosen"] for p in pairs[:4]], T)
    lr_, nr = side_logps(c, P0, [p["rejected"] for p in pairs[:4]], T)
    mc, mr = lc / nc, lr_ / nr
    want = {"dpo": math.log(2), "ipo": 25.0,
            "simpo": F.softplus(-(2.0 * (mc - mr) - 0.5)).mean().item(),
            "orpo": (-mc + 0.1 * F.softplus(-((mc - mr) - (torch.log(1 - mc.exp()) - torch.log(1 - mr.exp()))))
                     ).mean().item()}
    firsts = {}
    for loss in LOSSES:
        P, log, refs = align(c, base, ad, pairs, T, 3, 2, 2, opt, loss)
        close(log[0]["loss"], want[loss], 1e-10)
        if loss in ("dpo", "ipo"):
            assert log[0]["rewards/margins"] == 0 and log[0]["rewards/accuracy"] == 0  # strict: ties are not wins
            close(refs[0][0], lc[0].item())
        # over all pairs, before and after: it learns to prefer the chosen sides
        before = evaluate(c, ft.to_params(base, ad, 2.0), pairs, T, loss, DEFAULT_BETA[loss], refs)
        after = evaluate(c, P, pairs, T, loss, DEFAULT_BETA[loss], refs)
        assert after["rewards/margins"] > before["rewards/margins"] and after["loss"] < before["loss"], loss
        firsts[loss] = [round(r["loss"], 6) for r in log] + [round(after["loss"], 6)]
    # a reference from --ref: another model's log-probs, so h != 0 at step 1
    other = ref.random_params(c, seed=9, std=0.3)
    _, log, refs = align(c, base, ad, pairs, T, 1, 2, 2, opt, "dpo", ref_model=(other, {}, 0.0))
    assert abs(log[0]["loss"] - math.log(2)) > 1e-3 and refs == reference_logps(c, ft.to_params(other, {}, 0), pairs, T)
    # --full trains every weight, LoRA only the adapters
    Pf, _, _ = align(c, base, {}, pairs, T, 1, 2, 1, dict(opt, lr=1e-3), "simpo", full=True)
    assert all(np.abs(Pf[k].detach().numpy() - base[k]).max() > 0 for k in base)
    print("ok log-probs = a plain loop per side (padding, cut at T+1); accumulation (B 4, A 1) == (B 2, A 2)"
          " dense and MoE; step 1 from B = 0 by hand; margins grow; --ref; --full. Loss of steps 1-3, then over"
          " all pairs after them:",
          json.dumps(firsts))


def test_reward_model():
    c, base, pairs, T = small_case()
    g = torch.Generator().manual_seed(3)
    head = (torch.randn(1, c["d_model"], generator=g, dtype=torch.float64) * 0.02).numpy()
    P = ft.to_params(base, {"score.weight": head}, 0.0)
    for p in pairs:  # the score by hand: final-norm output of the side alone at its last input position
        ids = p["chosen"][0]
        L = min(len(ids), T)
        x = final_hidden(c, P, torch.tensor([ids[:L]]), [L])[0, L - 1]
        close(side_scores(c, P, [p["chosen"], p["rejected"]], T)[0], (x @ P["score.weight"][0]).item(), 1e-12)
    opt = dict(lr=1e-2, min_lr=1e-3, warmup=1, wd=0.1, clip=1.0)
    ad = ft.init_adapters(c, ["q", "v"], 2)
    P1, log1 = reward(c, base, head, ad, pairs, T, 4, 4, 1, opt, center=0.01)
    _, log2 = reward(c, base, head, ad, pairs, T, 4, 2, 2, opt, center=0.01)
    assert all(abs(a[k] - b[k]) < 1e-12 for a, b in zip(log1, log2) for k in a)
    assert np.abs(P1["score.weight"].detach().numpy() - head).max() > 1e-4  # the head trains
    before = evaluate_reward(c, ft.to_params(base, dict(ad, **{"score.weight": head}), 2.0), pairs, T, 0.01)
    after = evaluate_reward(c, P1, pairs, T, 0.01)
    assert after["margin"] > before["margin"] and after["loss"] < before["loss"], (before, after)
    print("ok reward model: score = head . final-norm output at the last token; accumulation; it learns"
          f" (all pairs: loss {before['loss']:.4f} -> {after['loss']:.4f}, margin {before['margin']:.4f} ->"
          f" {after['margin']:.4f})")


def self_test():
    torch.set_num_threads(1)
    test_rendering()
    test_losses_by_hand()
    test_gradchecks()
    test_logps_and_identities()
    test_reward_model()
    print("PASS")


# ----------------------------------------------------------------------------
# Replaying a run from an ember checkpoint


def load_checkpoint(path):
    """(config, params, tokenizer.json text, adapters, lora scale) of an ember checkpoint (h5py);
    a fine-tune checkpoint loads its base (attr `base`)."""
    import h5py
    with h5py.File(path, "r") as f:
        raw = json.loads(f.attrs["config"])
        model = {k: f["model"][k][()].astype(np.float64) for k in f["model"]}
        tok = f["tokenizer/json"][()] if "tokenizer" in f else None
        base_path = f.attrs.get("base")
    tok = tok.decode() if isinstance(tok, bytes) else tok
    if base_path is None:
        return raw, model, tok, {}, 0.0
    base_path = base_path.decode() if isinstance(base_path, bytes) else base_path
    raw_b, base, tok_b, _, _ = load_checkpoint(base_path)
    lora = raw.get("lora", {})
    return raw_b, base, tok or tok_b, model, lora.get("alpha", 16.0) / lora.get("r", 8)


def replay(a):
    raw, base, tok_json, _, _ = load_checkpoint(a.base)
    c = ref.resolve_config({k: v for k, v in raw.items() if k in ref.DEFAULTS})
    lines = [json.loads(x) for x in open(a.data) if x.strip()]
    pairs, dropped = render_pairs(ft.Tokenizer(tok_json), lines, a.seq_len)
    print(f"{len(pairs)} pairs, {dropped} dropped", file=sys.stderr)
    adapters, scale = {}, a.lora_alpha / a.lora_r
    if a.adapters:  # the initial adapters (and score head) ember started from
        _, start, _, adapters, start_scale = load_checkpoint(a.adapters)
        if adapters:
            scale = start_scale
        elif "score.weight" in start:  # a --full reward checkpoint: its score head
            adapters = {"score.weight": start["score.weight"]}
    elif not a.full:
        adapters = ft.init_adapters(c, a.lora_targets.split(","), a.lora_r, seed=a.seed)
    opt = dict(lr=a.lr, min_lr=a.min_lr, warmup=a.warmup, wd=a.weight_decay, clip=a.clip)
    if a.reward:
        head = adapters.pop("score.weight", None)
        if head is None:
            head = np.random.default_rng(a.seed).normal(0, 0.02, size=(1, c["d_model"]))
        _, log = reward(c, base, head, adapters, pairs, a.seq_len, a.steps, a.batch_size, a.grad_accum, opt,
                        center=a.center_rewards, scale=scale, full=a.full)
    else:
        ref_model = None
        if a.ref:  # a base checkpoint, or a fine-tune one (its base with its adapters)
            _, ref_params, _, ref_adapters, ref_scale = load_checkpoint(a.ref)
            ref_model = (ref_params, ref_adapters, ref_scale)
        _, log, _ = align(c, base, adapters, pairs, a.seq_len, a.steps, a.batch_size, a.grad_accum, opt, a.loss,
                          beta=a.beta, ref_model=ref_model, scale=scale, full=a.full,
                          label_smoothing=a.label_smoothing, gamma=a.simpo_gamma, sft_weight=a.sft_weight)
    with open(a.out_json, "w") as f:
        for r in log:
            f.write(json.dumps(r) + "\n")
    print(f"wrote {a.out_json}: {len(log)} steps", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--base"), p.add_argument("--data"), p.add_argument("--out-json")
    p.add_argument("--reward", action="store_true", help="replay `ember reward` instead of `ember align`")
    p.add_argument("--loss", choices=LOSSES, default="dpo")
    p.add_argument("--beta", type=float), p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--simpo-gamma", type=float, default=0.5), p.add_argument("--sft-weight", type=float, default=0.0)
    p.add_argument("--center-rewards", type=float, default=0.0)
    p.add_argument("--ref", help="reference checkpoint (default: the starting model, LoRA: the base)")
    p.add_argument("--adapters", help="checkpoint holding the initial adapters / score head to start from "
                   "(a LoRA checkpoint's trained tensors, or a --full reward checkpoint's score.weight)")
    p.add_argument("--full", action="store_true")
    p.add_argument("--lora-r", type=int, default=8), p.add_argument("--lora-alpha", type=float, default=16.0)
    p.add_argument("--lora-targets", default="q,v")
    p.add_argument("--steps", type=int, default=3), p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--grad-accum", type=int, default=1), p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-4), p.add_argument("--min-lr", type=float, default=3e-5)
    p.add_argument("--warmup", type=int, default=0), p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0), p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.self_test or not a.base:
        self_test()
        return 0
    if not (a.data and a.out_json):
        p.error("--base needs --data and --out-json")
    torch.set_num_threads(1)
    replay(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
