#!/usr/bin/python3
"""Independent float64 PyTorch implementation of docs/model.md#rl-from-a-reward, replaying an
`ember rl` run (docs/cli.md#rl-from-a-reward) from the completions it dumped with --rollouts-out
(docs/formats.md#rl-prompts-jsonl).

Written from the contract alone (not from ember's C++), so that comparing the two checks both.
The sampling is not replayed (the completions are read from the dump); everything after it is:
the prompts rendered for generation (ChatML then <|im_start|>assistant\\n, or encode(prompt)),
the match reward on the decoded completion (or --reward-model's score of prompt then completion
text, rendered as ember reward renders a side; ppo's value head starting as its score head),
logp at the sampling temperature from the policy as it is before the step's updates (logp_old,
compared with the dump), the reference's (LoRA: the base without adapters; --full: the starting
model), PPO's V_old from the value head, the
advantages (GRPO per group with the unbiased std; PPO's token rewards with the k3-free KL
penalty, GAE with gamma 1 and lambda 0.95, whitening over the step's completion tokens), the
per-token GRPO and PPO losses with their selections, the loss of a step (sum over the step's
completion tokens over their count), the logged metrics (loss, kl, clip_fraction, value_loss,
reward, reward_std, completion_length; grad_norm as the mean of the iterations' norms before
clipping, which is what ember logs: docs/cli.md does not say), and --iterations AdamW
updates per step (torch semantics, docs/model.md#optimizer: t counts updates, so it advances
--iterations times a step) with the step's learning rate and global-norm clipping. The model
math, tokenizer, ChatML and LoRA come from spec_reference.py, finetune_reference.py and
align_reference.py. Dropout 0, no NF4, one rank.

  /usr/bin/python3 tools/rl_reference.py [--self-test]     hand-computed values, gradchecks
  /usr/bin/python3 tools/rl_reference.py --base CKPT --prompts FILE --rollouts FILE
      --out-json FILE [--out-tensors FILE.npz] [--start CKPT] [options as the ember rl run's]
      writes one JSON line per step: the metrics, and per completion (in the dump's order) the
      reward, advantage and logp_old it computed; --out-tensors the trained tensors after the
      last step. --start: a checkpoint holding the tensors the run started from (adapters,
      value head): ember draws them from its own generator.
"""
import argparse
import json
import math
import os
import re
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import align_reference as al  # noqa: E402
import finetune_reference as ft  # noqa: E402  (also routes spec_reference's linear through LoRA)
import spec_reference as ref  # noqa: E402

GAMMA, LAMBDA = 1.0, 0.95  # docs/model.md#advantages
GROUP_EPS = 1e-4  # A_i = (r_i - m) / (s + 1e-4)
WHITEN_EPS = 1e-8
VALUE_CLIP = 0.2

# ----------------------------------------------------------------------------
# Sampled text: any bytes. Decoded with surrogateescape (a byte that is not well-formed UTF-8
# becomes a lone surrogate, which no letter, number or space class matches: "other", as
# docs/formats.md#tokenizer-tokenizerjson-gpt-2-files says) and encoded back to the same bytes.

WHITE_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


def _class_of(prefixes):
    """A re character class body of every code point whose general category starts with one of prefixes."""
    import unicodedata
    out, start, prev = [], None, None
    for cp in range(0x110000):
        if unicodedata.category(chr(cp))[0] in prefixes:
            if start is None:
                start = cp
            prev = cp
        elif start is not None:
            out.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start else ""))
            start = None
    return "".join(out)


def unicode_pretokenizer():
    """The GPT-2 pattern with the full \\p{L}, \\p{N} and White_Space \\s, for Python's re
    (whose \\s also takes \\x1c-\\x1f)."""
    L, N, S = _class_of("L"), _class_of("N"), WHITE_SPACE
    return re.compile(f"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+|[{S}]+(?![^{S}])|[{S}]+")


class ByteTokenizer(ft.Tokenizer):
    """finetune_reference's tokenizer for any text, the bytes that are not UTF-8 included."""
    _pretoken = None

    def encode_ordinary(self, text):
        if ByteTokenizer._pretoken is None:
            ByteTokenizer._pretoken = unicode_pretokenizer()
        ids, spans, pos = [], [], 0
        for piece in ByteTokenizer._pretoken.findall(text):
            data = piece.encode("utf-8", "surrogateescape")
            for tok in self._bpe("".join(self.byte_char[b] for b in data)):
                ids.append(self.vocab[tok])
                spans.append((pos, pos + len(tok)))
                pos += len(tok)
        return ids, spans


# ----------------------------------------------------------------------------
# Prompts, completions, the match reward


def render_prompt(tok, prompt):
    """Prompt ids for generation: chat form in ChatML then <|im_start|> "assistant\\n"; text form encode(prompt)."""
    if isinstance(prompt, str):
        return tok.encode(prompt)
    assert prompt and prompt[-1]["role"] == "user", "the prompt must end with a user message"
    ids, _ = ft.render(tok, {"messages": prompt})
    return ids + [tok.special_id(ft.IM_START)] + tok.encode_ordinary("assistant\n")[0]


def decode(tok, ids):
    """Text of ids (byte-level strings back to bytes; special tokens as their content)."""
    inv = {v: k for k, v in tok.vocab.items()}
    char_byte = {ch: b for b, ch in tok.byte_char.items()}
    special = {v: k for k, v in tok.special.items()}
    out = bytearray()
    for i in ids:
        out += special[i].encode() if i in special else bytes(char_byte[ch] for ch in inv[i])
    return out.decode("utf-8", "surrogateescape")


def match_reward(tok, completion, answer, stops):
    """1 when the completion's text (its stop token left out) contains the answer, else 0."""
    ids = completion[:-1] if completion and completion[-1] in stops else completion
    return 1.0 if answer.encode() in decode(tok, ids).encode("utf-8", "surrogateescape") else 0.0


class RewardModel:
    """--reward-model: the score of prompt then completion text (its stop token left out),
    rendered as `ember reward` renders a pair's side and cut to the reward model's context + 1."""

    def __init__(self, path):
        raw, base, tok_json, trained, scale = al.load_checkpoint(path)
        self.c = ref.resolve_config({k: v for k, v in raw.items() if k in ref.DEFAULTS})
        self.P = ft.to_params(base, trained, scale)
        self.tok = ByteTokenizer(tok_json)
        self.head = (trained if "score.weight" in trained else base)["score.weight"]

    def score(self, policy_tok, prompt, completion, stops):
        ids = completion[:-1] if completion and completion[-1] in stops else completion
        text = decode(policy_tok, ids)
        side = text if isinstance(prompt, str) else [{"role": "assistant", "content": text}]
        T = self.c["max_seq_len"]
        ids, scored = al.cut_side(*al.render_side(self.tok, {"prompt": prompt, "c": side}, "c"), T)
        with torch.no_grad():
            return al.side_scores(self.c, self.P, [(ids, scored)], T)[0].item()


# ----------------------------------------------------------------------------
# The pieces of docs/model.md#rl-from-a-reward


def k3(logp, ref_):
    d = ref_ - logp
    return torch.exp(d) - d - 1


def grpo_advantages(rewards, G):
    """Per group of G (prompt-major): (r - mean) / (unbiased std + 1e-4)."""
    r = torch.as_tensor(rewards, dtype=torch.float64)
    assert G >= 2 and r.numel() % G == 0 and torch.isfinite(r).all()
    g = r.view(-1, G)
    m = g.mean(1, keepdim=True)
    s = torch.sqrt(((g - m) ** 2).sum(1, keepdim=True) / (G - 1))
    return ((g - m) / (s + GROUP_EPS)).reshape(-1)


def ppo_token_rewards(score, logp_old, ref_, kl):
    """-kl (logp_old - ref) per token, the score added on the last one."""
    r = -kl * (logp_old - ref_)
    r = r.clone()
    r[-1] += score
    return r


def gae(rewards, values, gamma=GAMMA, lam=LAMBDA):
    """(advantages, returns) over one completion's tokens; V and A after the last token 0."""
    L = rewards.numel()
    adv = torch.zeros(L, dtype=torch.float64)
    nxt_a, nxt_v = 0.0, 0.0
    for t in reversed(range(L)):
        delta = rewards[t] + gamma * nxt_v - values[t]
        adv[t] = delta + gamma * lam * nxt_a
        nxt_a, nxt_v = adv[t].item(), values[t].item()
    return adv, adv + values


def whiten(advs):
    """Each completion's advantages whitened with the mean and unbiased variance over all of them."""
    a = torch.cat(advs)
    n = a.numel()
    assert n >= 2
    mean = a.mean()
    var = max(0.0, (((a - mean) ** 2).sum() / (n - 1)).item())
    return [(x - mean) / math.sqrt(var + WHITEN_EPS) for x in advs]


def surrogate(rho, A, eps):
    """min(rho A, clip(rho) A) as a selection: (value, clipped flags); the clipped branch (no
    gradient in rho) where strictly smaller."""
    clipped = ((A > 0) & (rho > 1 + eps)) | ((A < 0) & (rho < 1 - eps))
    return torch.where(clipped, torch.clamp(rho, 1 - eps, 1 + eps).detach() * A, rho * A), clipped


def grpo_token_loss(logp, logp_old, ref_, A, eps, kl):
    s, clipped = surrogate(torch.exp(logp - logp_old), A, eps)
    loss = -s + kl * k3(logp, ref_) if kl > 0 else -s
    return loss, clipped


def value_term(V, V_old, R):
    """0.5 max((V - R)^2, (V_c - R)^2), V_c = V_old + clip(V - V_old, -0.2, 0.2); clipped where strictly larger."""
    vc = V_old + torch.clamp(V - V_old, -VALUE_CLIP, VALUE_CLIP)
    a, b = (V - R) ** 2, (vc - R) ** 2
    return 0.5 * torch.where(b > a, b, a)


def ppo_token_loss(logp, logp_old, A, V, V_old, R, eps, vf):
    s, clipped = surrogate(torch.exp(logp - logp_old), A, eps)
    vl = value_term(V, V_old, R)
    return -s + vf * vl, clipped, vl


def value_clipped(V, V_old, R):
    """Tokens whose value term takes the clipped V (a diagnostic, not logged by ember)."""
    vc = V_old + torch.clamp(V - V_old, -VALUE_CLIP, VALUE_CLIP)
    return (vc - R) ** 2 > (V - R) ** 2


# ----------------------------------------------------------------------------
# The model on one row prompt + completion


def row_pass(c, P, prompt, completion, tau, value=False):
    """logp at temperature tau of each completion token [L] (and V [L]: value head at the
    position before it, the one whose logits predict it)."""
    ids = list(prompt) + list(completion)
    inp = torch.tensor([ids[:-1]])
    h = al.final_hidden(c, P, inp, [len(ids) - 1])
    pos = torch.arange(len(prompt) - 1, len(ids) - 1)
    logits = al.logits_of(c, P, h)[0, pos]
    logp = torch.log_softmax(logits / tau, dim=-1).gather(-1, torch.tensor(completion)[:, None]).squeeze(-1)
    if not value:
        return logp, None
    return logp, h[0, pos] @ P["value.weight"][0]


# ----------------------------------------------------------------------------
# The run


def rl_step(c, P, P_ref, names, rows, o, state, t0, lr):
    """One step on rows [{prompt_ids, completion_ids, reward}] (prompt-major groups of G):
    logp_old, ref, V_old, advantages, then o['iterations'] updates. Returns (metrics, per-row
    values, updates done)."""
    ppo, tau = o["algo"] == "ppo", o["temperature"]
    with torch.no_grad():
        old = [row_pass(c, P, r["prompt_ids"], r["completion_ids"], tau, ppo) for r in rows]
        refs = [row_pass(c, P_ref, r["prompt_ids"], r["completion_ids"], tau)[0] for r in rows]
    scores = [r["reward"] for r in rows]
    if ppo:
        raw = [gae(ppo_token_rewards(s, lo, rf, o["kl"]), vo) for s, (lo, vo), rf in zip(scores, old, refs)]
        advs = whiten([a for a, _ in raw])
        rets = [R for _, R in raw]
    else:
        advs = grpo_advantages(scores, o["group_size"])
    N, G = sum(len(r["completion_ids"]) for r in rows), o["group_size"]
    sums = dict(loss=0.0, kl=0.0, clip_fraction=0.0, value_loss=0.0, value_clipped=0.0)
    norms, t = [], t0
    for _ in range(o["iterations"]):
        for k in names:
            P[k].grad = None
        total = torch.zeros((), dtype=torch.float64)
        for i, r in enumerate(rows):
            logp, V = row_pass(c, P, r["prompt_ids"], r["completion_ids"], tau, ppo)
            lo, vo = old[i]
            if ppo:
                tl, clipped, vl = ppo_token_loss(logp, lo, advs[i], V, vo, rets[i], o["clip_ratio"], o["vf_coef"])
                sums["value_loss"] += vl.sum().item()
                sums["value_clipped"] += value_clipped(V, vo, rets[i]).double().sum().item()
            else:
                tl, clipped = grpo_token_loss(logp, lo, refs[i], advs[i], o["clip_ratio"], o["kl"])
            total = total + tl.sum() / N
            sums["loss"] += tl.sum().item()
            sums["kl"] += (lo - refs[i]).sum().item()
            sums["clip_fraction"] += clipped.double().sum().item()
        total.backward()
        g = {k: P[k].grad if P[k].grad is not None else torch.zeros_like(P[k]) for k in names}
        norm = math.sqrt(sum((gg ** 2).sum().item() for gg in g.values()))
        norms.append(norm)
        if o["clip"] > 0:
            g = {k: gg * min(1.0, o["clip"] / (norm + 1e-6)) for k, gg in g.items()}
        t += 1
        al.adamw(P, names, state, g, lr, o["weight_decay"], t, o["beta1"], o["beta2"])
    n_all = N * o["iterations"]
    metrics = {k: v / n_all for k, v in sums.items() if ppo or not k.startswith("value")}
    sc = torch.tensor(scores, dtype=torch.float64)
    metrics.update(reward=sc.mean().item(), reward_std=sc.std(unbiased=True).item() if len(scores) > 1 else 0.0,
                   completion_length=N / len(rows), grad_norm=sum(norms) / len(norms), lr=lr,
                   prefilled_tokens=sum(len(r["prompt_ids"]) + G - 1 for r in rows[::G]),
                   groups_done_at_first_token=sum(len(r["completion_ids"]) == 1 for r in rows[::G]))
    per_row = [dict(reward=s, logp_old=lo.tolist(), advantage=(advs[i].tolist() if ppo else advs[i].item()))
               for i, (s, (lo, _)) in enumerate(zip(scores, old))]
    return metrics, per_row, t


def replay(c, base, trained, scale, full, steps_rows, o):
    """`ember rl` in float64 over the dumped steps; returns (P after the last step, names trained,
    per step (metrics, per-row values))."""
    P, names = al.make_params(base, trained, scale, full)
    P_ref = ft.to_params(base, {}, 0.0)  # LoRA: the base without adapters; --full: the starting model
    state, t, log = {}, 0, []
    for s, rows in enumerate(steps_rows):
        lr = ref.lr_at(s, o["lr"], o["min_lr"], o["warmup"], o["steps"])
        metrics, per_row, t = rl_step(c, P, P_ref, names, rows, o, state, t, lr)
        log.append((dict(metrics, step=s + 1), per_row))
    return P, names, log


# ----------------------------------------------------------------------------
# Self-test


def close(a, b, tol=1e-12):
    a, b = float(a), float(b)
    assert abs(a - b) <= tol * max(1.0, abs(b)), (a, b)


def test_pieces_by_hand():
    # a 2x2 group: rewards [1, 0] and [3, 1]: means 0.5 and 2, unbiased std sqrt(0.5) and sqrt(2)
    A = grpo_advantages([1.0, 0.0, 3.0, 1.0], 2)
    for got, want in zip(A.tolist(), [0.5 / (math.sqrt(0.5) + 1e-4), -0.5 / (math.sqrt(0.5) + 1e-4),
                                      1 / (math.sqrt(2) + 1e-4), -1 / (math.sqrt(2) + 1e-4)]):
        close(got, want)
    assert grpo_advantages([0.7, 0.7, 1.0, 0.0], 2)[:2].abs().max() == 0  # equal rewards: A = 0
    # GAE over 3 tokens: kl 0.1, logp_old [-1, -2, -0.5], ref [-1.5, -1, -0.5], score 2, V_old [0.5, 0.2, -0.1]
    r = ppo_token_rewards(2.0, torch.tensor([-1.0, -2.0, -0.5], dtype=torch.float64),
                          torch.tensor([-1.5, -1.0, -0.5], dtype=torch.float64), 0.1)
    for got, want in zip(r.tolist(), [-0.05, 0.1, 2.0]):
        close(got, want)
    adv, ret = gae(r, torch.tensor([0.5, 0.2, -0.1], dtype=torch.float64))
    # A2 = 2 + 0.1 = 2.1; A1 = (0.1 - 0.1 - 0.2) + 0.95 * 2.1 = 1.795; A0 = (-0.05 + 0.2 - 0.5) + 0.95 * 1.795
    for got, want in zip(adv.tolist(), [1.35525, 1.795, 2.1]):
        close(got, want)
    for got, want in zip(ret.tolist(), [1.85525, 1.995, 2.0]):
        close(got, want)
    # whitening over two completions [1, 2] and [3, 4]: mean 2.5, unbiased var 5/3
    w = whiten([torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([3.0, 4.0], dtype=torch.float64)])
    for got, want in zip(torch.cat(w).tolist(), [(x - 2.5) / math.sqrt(5 / 3 + 1e-8) for x in (1, 2, 3, 4)]):
        close(got, want)
    # k3 and its derivative 1 - exp(ref - logp)
    lp = torch.tensor([-1.0, -0.3], dtype=torch.float64, requires_grad=True)
    rf = torch.tensor([-1.2, -0.3], dtype=torch.float64)
    k = k3(lp, rf)
    close(k[0], math.exp(-0.2) + 0.2 - 1), close(k[1], 0.0)
    k.sum().backward()
    close(lp.grad[0], 1 - math.exp(-0.2)), close(lp.grad[1], 0.0)
    # surrogate: clipped where strictly smaller; its gradient in logp 0
    rho = torch.tensor([1.5, 1.5, 0.5, 0.5, 1.1, 1.2], dtype=torch.float64)
    A_ = torch.tensor([1.0, -1.0, 1.0, -1.0, 2.0, 1.0], dtype=torch.float64)
    s, cl = surrogate(rho, A_, 0.2)
    assert cl.tolist() == [True, False, False, True, False, False]  # rho = 1 + eps exactly: not clipped
    for got, want in zip(s.tolist(), [1.2, -1.5, 0.5, -0.8, 2.2, 1.2]):
        close(got, want)
    # value term: the clipped one where strictly larger
    vl = value_term(torch.tensor([1.0, 0.5], dtype=torch.float64), torch.tensor([0.0, 0.4], dtype=torch.float64),
                    torch.tensor([2.0, 0.0], dtype=torch.float64))
    close(vl[0], 0.5 * (2.0 - 0.2) ** 2), close(vl[1], 0.5 * 0.25)
    print("ok by hand: GRPO 2x2 group, PPO token rewards, GAE over 3 tokens, whitening, k3, clip selections")


def test_gradchecks():
    g = torch.Generator().manual_seed(3)
    n = 7
    lo = -torch.rand(n, generator=g, dtype=torch.float64) * 3
    rf = -torch.rand(n, generator=g, dtype=torch.float64) * 3
    A = torch.tensor([1.0, -1.0, 0.5, -0.7, 1.3, -2.0, 0.3], dtype=torch.float64)
    # logp = logp_old + offsets that keep rho away from 1 +- eps: both branches present
    off = torch.tensor([0.5, -0.5, 0.05, 0.1, -0.4, 0.02, 0.3], dtype=torch.float64)
    logp = (lo + off).requires_grad_(True)
    f = lambda x: grpo_token_loss(x, lo, rf, A, 0.2, 0.04)[0]  # noqa: E731
    assert torch.autograd.gradcheck(f, (logp,), eps=1e-6, atol=1e-8)
    assert grpo_token_loss(logp, lo, rf, A, 0.2, 0.04)[1].any()
    V = torch.tensor([0.1, 0.9, -0.5, 0.3, 0.0, 1.5, -0.35], dtype=torch.float64, requires_grad=True)
    Vo = torch.tensor([0.0, 0.5, -0.45, 0.8, 0.1, 1.0, 0.0], dtype=torch.float64)
    R = torch.tensor([1.0, 0.0, 2.0, 0.2, -1.0, 1.2, -2.0], dtype=torch.float64)
    h = lambda x, v: ppo_token_loss(x, lo, A, v, Vo, R, 0.2, 0.1)[0]  # noqa: E731
    assert torch.autograd.gradcheck(h, (logp, V), eps=1e-6, atol=1e-8)
    print("ok torch.autograd.gradcheck of the GRPO and PPO per-token losses (clipped and unclipped tokens)")


def small_case(algo, full=False, G=2, seed=1):
    """A random model over a byte tokenizer with ChatML, and random rollouts of 2 steps."""
    raw = dict(vocab_size=259, d_model=16, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=24, qk_norm=True,
               max_seq_len=48)
    c = ref.resolve_config(raw)
    base = ref.random_params(c, seed=seed, std=0.3)
    tok = ft.Tokenizer(ft.tokenizer_json())
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(2):
        rows = []
        for p in range(2):
            prompt = render_prompt(tok, [{"role": "user", "content": "ab"[p] * 3}])
            for _ in range(G):
                comp = rng.integers(97, 123, size=int(rng.integers(1, 6))).tolist() + [258]
                rows.append(dict(prompt_ids=prompt, completion_ids=comp, reward=float(rng.random())))
        steps.append(rows)
    trained = {} if full else al.random_adapters(c, ["q", "v"], 2)
    if not full:
        trained = {k: (np.zeros_like(v) if k.endswith("lora_B.weight") else v) for k, v in trained.items()}
    if algo == "ppo":
        trained["value.weight"] = rng.normal(0, 0.02, size=(1, c["d_model"]))
    o = dict(algo=algo, temperature=0.7, kl=0.05, clip_ratio=0.2, vf_coef=0.1, group_size=G, iterations=2,
             lr=1e-2, min_lr=1e-3, warmup=1, steps=2, clip=1.0, weight_decay=0.1, beta1=0.9, beta2=0.95)
    return c, base, trained, steps, o, tok


def test_first_update():
    """LoRA from B = 0: the policy is the reference (k3 = 0, kl 0) and rho = 1 at the first
    iteration, so GRPO's loss is -sum_i A_i L_i / N, nothing is clipped; later iterations move rho."""
    c, base, trained, steps, o, tok = small_case("grpo")
    _, _, log = replay(c, base, trained, 2.0, False, steps, dict(o, iterations=1))
    rows = steps[0]
    A = grpo_advantages([r["reward"] for r in rows], 2)
    N = sum(len(r["completion_ids"]) for r in rows)
    close(log[0][0]["loss"], -sum(a * len(r["completion_ids"]) for a, r in zip(A.tolist(), rows)) / N, 1e-12)
    close(log[0][0]["kl"], 0.0), close(log[0][0]["clip_fraction"], 0.0)
    assert log[1][0]["kl"] != 0  # step 2: the adapters moved
    # logp at tau by hand for one row: a plain loop over positions, softmax(z / tau)
    P = ft.to_params(base, {}, 0.0)
    r = rows[1]
    lp, _ = row_pass(c, P, r["prompt_ids"], r["completion_ids"], 0.7)
    ids = r["prompt_ids"] + r["completion_ids"]
    for j, tpos in enumerate(range(len(r["prompt_ids"]), len(ids))):
        z = al.logits_of(c, P, al.final_hidden(c, P, torch.tensor([ids[:tpos]]), [tpos]))[0, -1]
        close(lp[j], torch.log_softmax(z / 0.7, -1)[ids[tpos]].item(), 1e-12)
    # PPO (LoRA and --full) runs, the value head trains, --full moves every weight
    for full in (False, True):
        c, base, trained, steps, o, tok = small_case("ppo", full=full)
        P, names, log = replay(c, base, trained, 2.0, full, steps, o)
        moved = np.abs(P["value.weight"].detach().numpy() - trained["value.weight"]).max()
        assert "value.weight" in names and moved > 0
        # whitened: the advantages sum to 0 over the step
        assert all(abs(sum(sum(x["advantage"]) for x in pr)) < 1e-9 for _, pr in log)
        if full:
            assert all(np.abs(P[k].detach().numpy() - base[k]).max() > 0 for k in base)
    # rendering and the match reward
    ids = render_prompt(tok, [{"role": "user", "content": "2+2?"}])
    assert ids == [257] + list(b"user\n2+2?") + [258, 10, 257] + list(b"assistant\n"), ids
    assert match_reward(tok, list(b"it is 4") + [258], "4", {258, 256}) == 1.0
    assert match_reward(tok, list(b"<|im_end|>"), "<|im_end|>", {258}) == 1.0
    assert match_reward(tok, list(b"it is") + [258], "<|im_end|>", {258}) == 0.0
    print("ok first update from B = 0 (loss -sum A L / N, kl 0, nothing clipped), logp at a temperature by hand,"
          " PPO advantages whitened, value head and --full train, prompt rendering, match reward")


def self_test():
    torch.set_num_threads(1)
    test_pieces_by_hand()
    test_gradchecks()
    test_first_update()
    print("PASS")


# ----------------------------------------------------------------------------
# Replaying a run


def read_rollouts(path):
    """Lines of the --rollouts-out file grouped by step, in file order."""
    steps = {}
    for line in open(path):
        if line.strip():
            j = json.loads(line)
            steps.setdefault(int(j["step"]), []).append(j)
    assert sorted(steps) == list(range(1, len(steps) + 1)), f"steps {sorted(steps)}"
    return [steps[s] for s in sorted(steps)]


def run_replay(a):
    raw, base, tok_json, _, _ = al.load_checkpoint(a.base)
    c = ref.resolve_config({k: v for k, v in raw.items() if k in ref.DEFAULTS})
    tok = ByteTokenizer(tok_json)
    prompts = [json.loads(x) for x in open(a.prompts) if x.strip()]
    stops = {tok.special[s] for s in (ft.IM_END, ft.EOT) if s in tok.special}
    dumped = read_rollouts(a.rollouts)
    rm = RewardModel(a.reward_model) if a.reward_model else None
    steps_rows, prompt_mismatch = [], 0
    for rows in dumped:
        mine = []
        for r in rows:
            line = prompts[r["prompt"]]
            prompt_mismatch += render_prompt(tok, line["prompt"]) != r["prompt_ids"]
            reward = (rm.score(tok, line["prompt"], r["completion_ids"], stops) if rm
                      else match_reward(tok, r["completion_ids"], line["answer"], stops))
            mine.append(dict(prompt_ids=r["prompt_ids"], completion_ids=r["completion_ids"], reward=reward))
        steps_rows.append(mine)
    trained, scale = {}, a.lora_alpha / a.lora_r
    if a.start:
        _, start_base, _, adapters, start_scale = al.load_checkpoint(a.start)
        if adapters:  # LoRA: adapters (B = 0 at the start) and the value head
            trained = {k: (np.zeros_like(v) if k.endswith("lora_B.weight") else v) for k, v in adapters.items()}
            scale = start_scale
        elif "value.weight" in start_base:
            trained = {"value.weight": start_base["value.weight"]}
        base = {k: v for k, v in base.items()}
    if rm and a.algo == "ppo":  # the value head starts as the reward model's score head
        trained["value.weight"] = rm.head
    o = dict(algo=a.algo, temperature=a.temperature, kl=a.kl, clip_ratio=a.clip_ratio, vf_coef=a.vf_coef,
             group_size=a.group_size, iterations=a.iterations, lr=a.lr, min_lr=a.min_lr, warmup=a.warmup,
             steps=a.steps, clip=a.clip, weight_decay=a.weight_decay, beta1=a.beta1, beta2=a.beta2)
    P, names, log = replay(c, base, trained, scale, a.full, steps_rows, o)
    with open(a.out_json, "w") as f:
        for metrics, per_row in log:
            f.write(json.dumps(dict(metrics, rows=per_row, prompt_mismatch=int(prompt_mismatch))) + "\n")
    if a.out_tensors:
        np.savez(a.out_tensors, **{k: P[k].detach().numpy() for k in names})
    print(f"wrote {a.out_json}: {len(log)} steps, {sum(len(r) for r in steps_rows)} completions,"
          f" {prompt_mismatch} prompts rendered otherwise", file=sys.stderr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--base"), p.add_argument("--prompts"), p.add_argument("--rollouts")
    p.add_argument("--out-json"), p.add_argument("--out-tensors")
    p.add_argument("--start", help="checkpoint of the tensors the run started from (adapters, value head)")
    p.add_argument("--reward", default="match", help="match (the default without --reward-model)")
    p.add_argument("--reward-model", help="an ember reward checkpoint: the score (and ppo's value head start)")
    p.add_argument("--algo", choices=("grpo", "ppo"), default="grpo")
    p.add_argument("--group-size", type=int, default=8), p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--iterations", type=int, default=1), p.add_argument("--clip-ratio", type=float, default=0.2)
    p.add_argument("--kl", type=float, default=0.04), p.add_argument("--vf-coef", type=float, default=0.1)
    p.add_argument("--full", action="store_true")
    p.add_argument("--lora-r", type=int, default=8), p.add_argument("--lora-alpha", type=float, default=16.0)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, help="accepted; the chunks of rows do not change the step's sums")
    p.add_argument("--lr", type=float, default=3e-4), p.add_argument("--min-lr", type=float, default=3e-5)
    p.add_argument("--warmup", type=int, default=0), p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--beta1", type=float, default=0.9), p.add_argument("--beta2", type=float, default=0.95)
    p.add_argument("--clip", type=float, default=1.0)
    a = p.parse_args(argv)
    if a.self_test or not a.base:
        self_test()
        return 0
    if not (a.prompts and a.rollouts and a.out_json):
        p.error("--base needs --prompts, --rollouts and --out-json")
    torch.set_num_threads(1)
    run_replay(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
