#!/usr/bin/python3
"""Check the `ember` binary against the independent reference of docs/model.md (spec_reference.py).

Usage: /usr/bin/python3 tools/check_against_spec.py PATH/TO/ember WORK_DIR

(a) eval check: for each config, writes a random checkpoint (h5py, docs/formats.md)
    and token shards (docs/formats.md), runs `ember eval --grads-out` and compares every
    loss term and every parameter gradient with the float64 reference
    (relative L2 error < 1e-4).
(b) train check: 10 sequential AdamW steps with warmup, cosine, weight decay and
    clipping; compares each tensor's change from its initial value
    (relative L2 error < 1e-3).
Exits non-zero when any comparison fails.
"""
import json
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec_reference as ref  # noqa: E402

EVAL_TOL = 1e-4
TRAIN_TOL = 1e-3
# a reference tensor this small relative to the largest one is zero up to float64 rounding
ZERO_FRAC = 1e-9

# name -> (config, weight std, B, T, batches, n_tokens, uint32 shard)
EVAL_CASES = {
    "dense-gqa-qknorm-zloss": (dict(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2,
                                    ffn_hidden=48, qk_norm=True, z_loss_coef=0.01, max_seq_len=32),
                               0.3, 3, 12, 3, 12 * 7 + 5, False),
    "gpt2-layernorm-geluTanh-learned-bias": (dict(vocab_size=48, d_model=32, n_layers=2, n_heads=4,
                                                  norm="layernorm", ffn_act="gelu_tanh", pos="learned",
                                                  bias=True, tie_embeddings=True, max_seq_len=16),
                                             0.2, 2, 16, 3, 16 * 5 + 3, False),
    "window-global-softcaps-parallel-untied-sinusoidal-mqa": (
        dict(vocab_size=40, d_model=24, n_layers=3, n_heads=4, n_kv_heads=1, head_dim=8,
             ffn_hidden=40, ffn_act="geglu", pos="sinusoidal", sliding_window=4, global_every=2,
             attn_softcap=1.5, final_softcap=2.5, parallel_block=True, tie_embeddings=False,
             z_loss_coef=0.02, max_seq_len=16),
        0.4, 2, 12, 2, 12 * 6 + 1, True),
    "moe-shared-every2-aux-routerz": (
        dict(vocab_size=64, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, ffn_hidden=40, max_seq_len=16,
             moe=dict(n_experts=4, top_k=2, expert_hidden=24, n_shared=1, every=2, aux_loss_coef=0.1,
                      router_z_loss_coef=0.05)),
        0.3, 4, 8, 2, 8 * 11 + 2, False),
    "moe-top1-unnormed-bias-layernorm-nopos-relu": (
        dict(vocab_size=32, d_model=16, n_layers=2, n_heads=2, ffn_act="relu", bias=True, pos="none",
             norm="layernorm", max_seq_len=16,
             moe=dict(n_experts=3, top_k=1, expert_hidden=20, norm_topk_prob=False, every=1,
                      aux_loss_coef=0.2, router_z_loss_coef=0.1)),
        0.3, 2, 8, 2, 8 * 6 + 1, False),
    "dense-rope-theta-swiglu-default-ffn": (
        dict(vocab_size=32, d_model=16, n_layers=1, n_heads=2, rope_theta=100.0, max_seq_len=16),
        0.3, 2, 8, 2, 8 * 4 + 1, False),
}

TRAIN_CASES = ["dense-gqa-qknorm-zloss", "gpt2-layernorm-geluTanh-learned-bias",
               "moe-shared-every2-aux-routerz"]
TRAIN_ARGS = dict(steps=10, lr=1e-3, warmup=3, min_lr=1e-4, wd=0.1, clip=1.0)


def write_checkpoint(path, config, params):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "ember-checkpoint"
        f.attrs["version"] = np.int64(1)
        f.attrs["config"] = json.dumps(config)
        g = f.create_group("model")
        for name, a in params.items():
            g.create_dataset(name, data=np.asarray(a, dtype=np.float32))


def rel_err(a, b):
    """L2(a - b) / L2(b); absolute L2 when the reference is exactly zero."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    nb = np.linalg.norm(b)
    d = np.linalg.norm(a - b)
    return d / nb if nb > 0 else d


def run(cmd):
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p, time.time() - t0


def case_data(name, work):
    raw, std, B, T, N, ntok, u32 = EVAL_CASES[name]
    c = ref.resolve_config(raw)
    seed = sum(map(ord, name))  # stable across runs
    params = ref.random_params(c, seed=seed, std=std)
    rng = np.random.default_rng(seed + 1)
    tokens = rng.integers(0, c["vocab_size"], size=ntok)
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    shard = os.path.join(d, "tokens.bin")
    ref.write_shard(shard, tokens, uint32=u32)
    ckpt = os.path.join(d, "init.h5")
    write_checkpoint(ckpt, raw, params)
    return c, params, ref.read_shard(shard), shard, ckpt, d, B, T, N


def check_eval(ember, name, work):
    c, params, tokens, shard, ckpt, d, B, T, N = case_data(name, work)
    gpath = os.path.join(d, "grads.h5")
    if os.path.exists(gpath):  # from an earlier run: `ember eval --grads-out` never overwrites a file
        os.remove(gpath)
    _, secs = run([ember, "eval", "--checkpoint", ckpt, "--data", shard, "--batch-size", str(B),
                   "--seq-len", str(T), "--batches", str(N), "--grads-out", gpath])
    batches = [ref.sequential_batch(tokens, s, B, T) for s in range(N)]
    losses, grads, gap = ref.eval_with_grads(c, params, batches)
    rows, ok = [], True
    with h5py.File(gpath, "r") as f:
        for k in ("total", "ce", "z", "aux", "router_z"):
            if f"loss/{k}" not in f:
                rows.append((f"loss/{k}", None, "MISSING"))
                ok = False
                continue
            e = float(f[f"loss/{k}"][()])
            r = losses[k]
            err = abs(e - r) / abs(r) if r != 0 else abs(e - r)
            rows.append((f"loss/{k}", err, f"ember {e:.9g} ref {r:.9g}"))
        names = set(f["grads"].keys()) if "grads" in f else set()
        gnorm = np.sqrt(sum(np.sum(g ** 2) for g in grads.values()))
        extra = names - set(grads)
        for n in sorted(extra):
            rows.append((f"grads/{n}", None, "EXTRA in ember"))
            ok = False
        for n, _ in ref.param_shapes(c):
            if n not in names:
                rows.append((f"grads/{n}", None, "MISSING in ember"))
                ok = False
                continue
            e = f["grads"][n][()]
            if e.shape != grads[n].shape:
                rows.append((f"grads/{n}", None, f"shape {e.shape} vs {grads[n].shape}"))
                ok = False
                continue
            rn = np.linalg.norm(grads[n])
            if rn < ZERO_FRAC * gnorm:
                # zero in exact arithmetic (e.g. k_proj.bias without rope: softmax is shift
                # invariant); float32 leaves rounding noise, so measure it against the global norm
                rows.append((f"grads/{n}", np.linalg.norm(e - grads[n]) / gnorm,
                             f"|ref| {rn:.1e}: zero in exact arithmetic, error / global grad norm"))
            else:
                rows.append((f"grads/{n}", rel_err(e, grads[n]), f"|ref| {rn:.3g}"))
    worst = max((r[1] for r in rows if r[1] is not None), default=0.0)
    ok = ok and all(r[1] is None or r[1] < EVAL_TOL for r in rows)
    return ok, worst, rows, secs, gap


def check_train(ember, name, work):
    c, params, tokens, shard, ckpt, d, B, T, _ = case_data(name, work)
    a = TRAIN_ARGS
    out = os.path.join(d, "run")
    shutil.rmtree(out, ignore_errors=True)
    _, secs = run([ember, "train", "--init-from", ckpt, "--data", shard, "--sequential",
                   "--steps", str(a["steps"]), "--batch-size", str(B), "--seq-len", str(T),
                   "--lr", str(a["lr"]), "--warmup", str(a["warmup"]), "--min-lr", str(a["min_lr"]),
                   "--weight-decay", str(a["wd"]), "--clip", str(a["clip"]), "--out", out,
                   "--log-every", "100"])
    final, _ = ref.train_reference(c, params, lambda s: ref.sequential_batch(tokens, s, B, T),
                                   a["steps"], a["lr"], a["min_lr"], a["warmup"], a["wd"], a["clip"])
    rows, ok = [], True
    max_change = max(np.linalg.norm(final[n] - params[n]) for n in final)
    with h5py.File(os.path.join(out, f"step_{a['steps']:08d}.h5"), "r") as f:
        for n, _ in ref.param_shapes(c):
            if f"model/{n}" not in f:
                rows.append((n, None, "MISSING"))
                ok = False
                continue
            e = f["model"][n][()].astype(np.float64)
            init = params[n].astype(np.float64)
            rc, ec = np.linalg.norm(final[n] - init), np.linalg.norm(e - init)
            if rc < ZERO_FRAC * max_change:
                # gradient zero in exact arithmetic: Adam turns float32 rounding noise
                # (|g| ~ eps) into steps of up to lr, so there is nothing to compare
                rows.append((n, None, f"skipped: zero gradient in exact arithmetic; ref change {rc:.1e},"
                                      f" ember change {ec:.1e} (Adam on float32 rounding noise)"))
                continue
            rows.append((n, rel_err(e - init, final[n] - init), f"|ref change| {rc:.3g}"))
    worst = max((r[1] for r in rows if r[1] is not None), default=0.0)
    ok = ok and all(r[1] is None or r[1] < TRAIN_TOL for r in rows)
    return ok, worst, rows, secs


def print_rows(rows, tol, verbose):
    for n, err, note in rows:
        bad = (err is None and not note.startswith("skipped")) or (err is not None and err >= tol)
        if verbose or bad or "exact arithmetic" in note:
            e = "   n/a   " if err is None else f"{err:9.2e}"
            print(f"    {'FAIL' if bad else 'ok  '} {e}  {n}  ({note})")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ember, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    verbose = os.environ.get("EMBER_REF_VERBOSE", "") not in ("", "0")
    os.makedirs(work, exist_ok=True)
    all_ok = True
    t0 = time.time()
    print(f"(a) eval: loss terms and gradients vs float64 reference, tol {EVAL_TOL:g}")
    for name in EVAL_CASES:
        try:
            ok, worst, rows, secs, gap = check_eval(ember, name, work)
        except Exception as e:  # noqa: BLE001
            print(f"  FAIL {name}: {e}")
            all_ok = False
            continue
        all_ok &= ok
        extra = f", min top-k margin {gap:.1e}" if gap != float("inf") else ""
        print(f"  {'PASS' if ok else 'FAIL'} {name}: max rel err {worst:.2e} over {len(rows)} tensors"
              f" (ember {secs:.1f}s{extra})")
        print_rows(rows, EVAL_TOL, verbose)
    print(f"(b) train: change of each tensor over {TRAIN_ARGS['steps']} steps vs reference, tol {TRAIN_TOL:g}")
    for name in TRAIN_CASES:
        try:
            ok, worst, rows, secs = check_train(ember, name, work)
        except Exception as e:  # noqa: BLE001
            print(f"  FAIL {name}: {e}")
            all_ok = False
            continue
        all_ok &= ok
        print(f"  {'PASS' if ok else 'FAIL'} {name}: max rel err {worst:.2e} over {len(rows)} tensors"
              f" (ember {secs:.1f}s)")
        print_rows(rows, TRAIN_TOL, verbose)
    print(f"{'PASS' if all_ok else 'FAIL'} ({time.time() - t0:.1f}s)")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
