#!/usr/bin/python3
"""Check `ember finetune` against an independent reference of docs/model.md (finetune_reference.py).

Usage: /usr/bin/python3 tools/check_finetune.py PATH/TO/ember WORK_DIR

For each case: trains a small BPE tokenizer with `ember tokenize --train` (the ChatML tokens
appended when it lacks them), writes a base checkpoint with random weights and that tokenizer
(h5py, docs/formats.md), writes a chat JSONL file (system message, several turns, a plain text
line, a conversation cut at T+1 tokens, one with no trained token, an answer starting with
spaces), then runs `ember finetune --sequential --grad-accum 2 --save-every 1` with adapters on
every target for 3 steps and compares:
  - the fine-tune checkpoints: adapter names and shapes, root attrs base / base_sha256, config lora;
  - the initial A (recovered from step 1, where B = 0 gives A no gradient: A1 = A0 (1 - lr_0 wd))
    lies in (-1/sqrt(in), 1/sqrt(in)) and fills it;
  - each adapter after steps 1, 2 and 3 against the float64 reference started from (A0, B = 0):
    relative L2 error of its change (A_s - A0, B_s) < 1e-3 (float32 against float64 through
    Adam; A after step 1 is not compared, it defines A0);
  - metrics.jsonl of each step: the loss (cross-entropy per trained token) and the gradient norm
    before clipping within 1e-5 relative, the trained-token count exactly.
Exits non-zero when any comparison fails.
"""
import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import finetune_reference as ft  # noqa: E402
import spec_reference as ref  # noqa: E402

CHANGE_TOL = 1e-3
LOSS_TOL = 1e-5
TARGETS = ["q", "k", "v", "o", "gate", "up", "down", "head"]
RUN = dict(steps=3, batch_size=2, grad_accum=2, seq_len=32, lora_r=4, lora_alpha=8.0, lr=1e-2,
           min_lr=1e-3, warmup=2, weight_decay=0.1, clip=1.0)

CASES = {
    "dense-gqa-qknorm-zloss-tied": dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=48,
                                        qk_norm=True, z_loss_coef=0.01, max_seq_len=32),
    "moe-shared-untied-bias-layernorm": dict(d_model=24, n_layers=2, n_heads=4, ffn_hidden=32, bias=True,
                                             norm="layernorm", tie_embeddings=False, max_seq_len=32,
                                             moe=dict(n_experts=3, top_k=2, expert_hidden=16, n_shared=1,
                                                      every=2, aux_loss_coef=0.1, router_z_loss_coef=0.05)),
}

WORDS = "the cat sat on a mat and ran to its hat while dogs bark at night who said what is two plus three five".split()
CHAT = [
    {"messages": [{"role": "system", "content": "You answer in one line."},
                  {"role": "user", "content": "Who said: the cat sat on a mat?"},
                  {"role": "assistant", "content": "That was a dog."}]},
    {"messages": [{"role": "user", "content": "What is two plus three?"},
                  {"role": "assistant", "content": "two plus three is five."},
                  {"role": "user", "content": "and the hat?"},
                  {"role": "assistant", "content": "on the cat"}]},
    {"text": "the cat ran to its hat<|endoftext|>the dogs bark"},
    {"messages": [{"role": "user", "content": "the dogs bark at night while the cat sat on a mat and "
                                              "ran to its hat, who said what?"},
                  {"role": "assistant", "content": "nobody said what the dogs said at night"}]},
    {"messages": [{"role": "user", "content": "a hat?"}, {"role": "assistant", "content": "  the hat"}]},
    {"messages": [{"role": "system", "content": "no answer here"}, {"role": "user", "content": "cat"}]},
    {"messages": [{"role": "user", "content": "five"}, {"role": "assistant", "content": "is two plus three"}]},
]


def run(cmd):
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"command failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
    return p, time.time() - t0


def chat_tokenizer(ember, d):
    """`ember tokenize --train` on a small corpus, with the ChatML tokens appended if missing."""
    rng = np.random.default_rng(7)
    corpus = os.path.join(d, "corpus.txt")
    with open(corpus, "w") as f:
        for _ in range(300):
            f.write(" ".join(WORDS[i] for i in rng.integers(0, len(WORDS), size=12)) + "\n")
    path = os.path.join(d, "tokenizer.json")
    run([ember, "tokenize", "--train", "--vocab-size", "300", corpus, "--out", path])
    j = json.load(open(path))
    have = {t["content"] for t in j["added_tokens"]}
    for s in (ft.EOT, ft.IM_START, ft.IM_END):
        if s not in have:
            i = len(j["model"]["vocab"])
            j["added_tokens"].append(dict(id=i, content=s, single_word=False, lstrip=False, rstrip=False,
                                          normalized=False, special=True))
            j["model"]["vocab"][s] = i
    return json.dumps(j), len(j["model"]["vocab"])


def fresh_work_with_chat_tokenizer(doc):
    """argv [EMBER, WORK] -> (ember, work emptied, chat tokenizer JSON, its vocabulary size),
    or None after printing doc when the arguments are not those two."""
    if len(sys.argv) != 3:
        print(doc)
        return None
    ember, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    return (ember, work) + tuple(chat_tokenizer(ember, work))


def write_base(path, raw, params, tokenizer_json):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "ember-checkpoint"
        f.attrs["version"] = np.int64(1)
        f.attrs["config"] = json.dumps(raw)
        g = f.create_group("model")
        for name, a in params.items():
            g.create_dataset(name, data=np.asarray(a, dtype=np.float32))
        b = tokenizer_json.encode("utf-8")
        f.create_dataset("tokenizer/json", data=np.array(b, dtype=h5py.string_dtype("utf-8", len(b))))


def rel_err(a, b):
    nb, d = np.linalg.norm(b), np.linalg.norm(np.asarray(a, np.float64) - b)
    return d / nb if nb > 0 else d


def read_adapters(path):
    with h5py.File(path, "r") as f:
        model = {k: f["model"][k][()].astype(np.float64) for k in f["model"]}
        attrs = {k: f.attrs[k] for k in f.attrs}
    return model, {k: v.decode() if isinstance(v, bytes) else v for k, v in attrs.items()}


def check_files(c, base_path, out, rows_out):
    """Names, shapes, root attrs, config of the step-1 checkpoint; returns (A0, model after each step)."""
    a = RUN
    want = {}
    for module, fan_in, fan_out in ft.lora_modules(c, TARGETS):
        want[module + ".lora_A.weight"] = (a["lora_r"], fan_in)
        want[module + ".lora_B.weight"] = (fan_out, a["lora_r"])
    steps = [read_adapters(os.path.join(out, f"step_{s:08d}.h5")) for s in range(1, a["steps"] + 1)]
    model, attrs = steps[0]
    got = {k: v.shape for k, v in model.items()}
    ok = got == want
    wrong = [(k, got[k], want[k]) for k in got if k in want and got[k] != want[k]]
    rows_out.append(("adapter names and shapes", 0.0 if ok else math.inf, 0.5,
                     f"{len(got)} tensors" if ok else f"missing {sorted(set(want) - set(got))}, "
                     f"extra {sorted(set(got) - set(want))}, shapes (name, ember, expected) {wrong}"))
    sha = hashlib.sha256(open(base_path, "rb").read()).hexdigest()
    good = attrs.get("base") == os.path.abspath(base_path) and attrs.get("base_sha256") == sha
    rows_out.append(("root attrs base, base_sha256", 0.0 if good else math.inf, 0.5,
                     f"base {attrs.get('base')}, sha256 {attrs.get('base_sha256')}"))
    lora = json.loads(attrs.get("config", "{}")).get("lora", {})
    good = (lora.get("r") == a["lora_r"] and lora.get("alpha") == a["lora_alpha"] and lora.get("dropout") == 0
            and lora.get("targets") == TARGETS)
    rows_out.append(("config lora", 0.0 if good else math.inf, 0.5, json.dumps(lora)))
    if not ok:
        raise RuntimeError("adapter names or shapes differ")
    decay = 1.0 - ref.lr_at(0, a["lr"], a["min_lr"], a["warmup"], a["steps"]) * a["weight_decay"]
    A0 = {k: v / decay if k.endswith("lora_A.weight") else np.zeros_like(v) for k, v in model.items()}
    good = len(A0) > 0
    for module, fan_in, _ in ft.lora_modules(c, TARGETS):
        A = A0[module + ".lora_A.weight"] * math.sqrt(fan_in)  # uniform in (-1, 1) when right
        good &= bool(np.abs(A).max() <= 1 + 1e-6 and A.max() > 0.5 and A.min() < -0.5)
    rows_out.append(("initial A uniform in (-1/sqrt(in), 1/sqrt(in))", 0.0 if good else math.inf, 0.5,
                     "max |A| sqrt(in) < 1 and both signs reach past 0.5" if good else "out of range or narrow"))
    return A0, [s[0] for s in steps]


def metrics_records(out):
    """step -> its metrics.jsonl record."""
    records = {}
    path = os.path.join(out, "metrics.jsonl")
    if os.path.exists(path):
        for line in open(path):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if isinstance(j, dict) and "step" in j:
                records[int(j["step"])] = j
    return records


def check_case(ember, name, work):
    a = RUN
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    tok_json, vocab = chat_tokenizer(ember, d)
    raw = dict(CASES[name], vocab_size=vocab)
    c = ref.resolve_config(raw)
    base = ref.random_params(c, seed=sum(map(ord, name)), std=0.3)
    base_path = os.path.join(d, "base.h5")
    write_base(base_path, raw, base, tok_json)
    data = os.path.join(d, "chat.jsonl")
    with open(data, "w") as f:
        for line in CHAT:
            f.write(json.dumps(line) + "\n")
    out = os.path.join(d, "ft")
    _, secs = run([ember, "finetune", "--base", base_path, "--data", data, "--out", out, "--sequential",
                   "--steps", str(a["steps"]), "--batch-size", str(a["batch_size"]),
                   "--grad-accum", str(a["grad_accum"]), "--seq-len", str(a["seq_len"]),
                   "--lora-r", str(a["lora_r"]), "--lora-alpha", f"{a['lora_alpha']:g}",
                   "--lora-targets", ",".join(TARGETS), "--lr", str(a["lr"]), "--min-lr", str(a["min_lr"]),
                   "--warmup", str(a["warmup"]), "--weight-decay", str(a["weight_decay"]),
                   "--clip", str(a["clip"]), "--val-fraction", "0", "--save-every", "1"])
    rows = []
    A0, ember_steps = check_files(c, base_path, out, rows)
    tok = ft.Tokenizer(tok_json)
    chat_rows = [ft.make_row(*ft.render(tok, line), a["seq_len"]) for line in CHAT]
    states, losses, counts, norms = ft.finetune(c, base, A0, chat_rows, a["steps"], a["batch_size"], a["grad_accum"],
                                         a["lr"], a["min_lr"], a["warmup"], a["weight_decay"], a["clip"],
                                         a["lora_alpha"] / a["lora_r"])
    for s in range(a["steps"]):
        for k in sorted(A0):
            if s == 0 and k.endswith("lora_A.weight"):
                continue
            change_ref, change_ember = states[s][k] - A0[k], ember_steps[s][k] - A0[k]
            rows.append((f"step {s + 1} {k}", rel_err(change_ember, change_ref), CHANGE_TOL,
                         f"|ref change| {np.linalg.norm(change_ref):.3g}"))
    logged = metrics_records(out)
    for s in range(a["steps"]):
        j = logged.get(s + 1, {})
        for key, r, tol in (("loss", losses[s], LOSS_TOL), ("grad_norm", norms[s], LOSS_TOL),
                            ("trained_tokens", counts[s], 0.5)):
            e = j.get(key)
            err = math.inf if e is None else abs(e - r) / abs(r) if key != "trained_tokens" else abs(e - r)
            rows.append((f"step {s + 1} logged {key}", err, tol, f"ember {e} ref {r:.9g}"))
    bad = [r for r in rows if not r[1] < r[2]]
    worst = max((r[1] for r in rows if r[0].startswith("step") and r[1] < math.inf), default=0.0)
    return not bad, worst, rows, bad, secs


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    ember, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    verbose = os.environ.get("EMBER_REF_VERBOSE", "") not in ("", "0")
    os.makedirs(work, exist_ok=True)
    t0 = time.time()
    print("reference self-test (tools/finetune_reference.py)")
    ft.self_test()
    all_ok = True
    print(f"ember finetune vs float64 reference: adapter changes tol {CHANGE_TOL:g}, logged loss and grad norm"
          f" tol {LOSS_TOL:g}")
    for name in CASES:
        try:
            ok, worst, rows, bad, secs = check_case(ember, name, work)
        except Exception as e:  # noqa: BLE001
            print(f"  FAIL {name}: {e}")
            all_ok = False
            continue
        all_ok &= ok
        print(f"  {'PASS' if ok else 'FAIL'} {name}: max rel err {worst:.2e} over {len(rows)} comparisons"
              f" (ember {secs:.1f}s)")
        for r in rows if verbose else bad:
            print(f"    {'FAIL' if r in bad else 'ok  '} {r[1]:9.2e}  {r[0]}  ({r[3]})")
    print(f"{'PASS' if all_ok else 'FAIL'} ({time.time() - t0:.1f}s)")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
