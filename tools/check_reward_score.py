#!/usr/bin/python3
"""Check `ember reward --score` against the independent float64 reference (align_reference.py).

Usage: /usr/bin/python3 tools/check_reward_score.py PATH/TO/ember WORK_DIR

A small BPE tokenizer (`ember tokenize --train`, the ChatML tokens appended), a base checkpoint
with random weights, and two reward checkpoints written here with h5py (docs/formats.md#checkpoints,
docs/formats.md#fine-tune-checkpoints): a full one (the base's weights and a random
`score.weight`) and a LoRA one naming the base (random q/v adapters with B != 0, and its own
`score.weight`). A file to score mixes pair lines and {"prompt", "completion"} lines, chat and
text, with sides longer than max_seq_len + 1 (cut) and a blank line. `ember reward --score`
(--batch-size 3 and 1) must print one JSON line per non-blank line, numbered as the file's lines,
each score within TOL of align_reference.side_scores (the score head on the final-norm output at
the side's last input position) of the same side rendered and cut by the reference.
Then `ember export --format hf` of a full and a LoRA reward model of a Llama, a Qwen3 (qk_norm) and
a Qwen3-MoE config: config.json ({Llama,Qwen3,Qwen3Moe}ForSequenceClassification, one label,
pad_token_id <|im_start|>), the tensors' names and shapes (score.weight [1, d_model], no lm_head),
and each side's score computed from the exported folder alone by tools/hf_reference.py (float64,
transformers' last-non-pad-token rule, also on the side padded with pad_token_id) equal to
`ember reward --score`; `ember import` of such a folder and the export of a reward model with
learned positions (GPT-2's class) each refused in one line. Exits non-zero when any comparison
fails.
"""
import hashlib
import json
import os
import subprocess
import sys

import h5py
import numpy as np

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import align_reference as ar  # noqa: E402
import check_finetune as cf  # noqa: E402
import finetune_reference as ft  # noqa: E402
import hf_reference as hf  # noqa: E402  (pure Python, float64: the exported folder alone)
import spec_reference as ref  # noqa: E402

# float32 scores against float64: relative to the largest |score| (about 1 here).
TOL = 2e-5
CONFIG = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=48, qk_norm=True, max_seq_len=40)
REWARD = {"center_rewards": 0.0}
LORA = {"r": 4, "alpha": 8.0, "dropout": 0.0, "targets": ["q", "v"]}
USER = lambda text: [{"role": "user", "content": text}]  # noqa: E731
SAY = lambda text: [{"role": "assistant", "content": text}]  # noqa: E731
LINES = [
    {"prompt": USER("Who said: the cat sat on a mat?"), "chosen": SAY("That was a dog."),
     "rejected": SAY("That was the hat.")},
    {"prompt": [{"role": "system", "content": "You answer in one line."}] + USER("two plus three?"),
     "completion": SAY("five")},
    None,  # a blank line: no output, but counted
    {"prompt": USER("a hat?") + SAY("on the cat") + USER("and the dog?"), "completion": SAY("at night")},
    {"prompt": USER(" ".join(["the cat sat on a mat"] * 4)), "chosen": SAY("the dogs bark at night"),
     "rejected": SAY("who")},  # both sides cut at T + 1
    {"prompt": "the cat sat on", "chosen": " a mat", "rejected": " the dogs"},
    {"prompt": "two plus three is", "completion": " five"},
    {"prompt": "the hat", "completion": " ran to its cat while the dogs bark at night " * 3},  # cut
    {"prompt": USER("five"), "chosen": SAY("is two plus three"), "rejected": SAY("is a cat")},
]


def write_checkpoint(path, raw, model, tokenizer_json, base=None):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "ember-checkpoint"
        f.attrs["version"] = np.int64(1)
        f.attrs["config"] = json.dumps(raw)
        if base:
            f.attrs["base"] = os.path.abspath(base)
            f.attrs["base_sha256"] = hashlib.sha256(open(base, "rb").read()).hexdigest()
        g = f.create_group("model")
        for name, a in model.items():
            g.create_dataset(name, data=np.asarray(a, dtype=np.float32))
        b = tokenizer_json.encode("utf-8")
        f.create_dataset("tokenizer/json", data=np.array(b, dtype=h5py.string_dtype("utf-8", len(b))))


def make_checkpoints(work, tok_json, vocab):
    """(name, path, P, c) of the full and the LoRA reward checkpoints."""
    raw = dict(CONFIG, vocab_size=vocab)
    c = ref.resolve_config(raw)
    params = ref.random_params(c, seed=5, std=0.3)
    rng = np.random.default_rng(11)
    base_path = os.path.join(work, "base.h5")
    write_checkpoint(base_path, raw, params, tok_json)
    full_head = rng.normal(0, 0.3, size=(1, c["d_model"])).astype(np.float32)
    full_path = os.path.join(work, "full.h5")
    write_checkpoint(full_path, dict(raw, reward=REWARD), dict(params, **{"score.weight": full_head}), tok_json)
    trained = {k: v.astype(np.float32) for k, v in ft.init_adapters(c, LORA["targets"], LORA["r"], seed=3).items()}
    for k in trained:
        if k.endswith("lora_B.weight"):
            trained[k] = rng.normal(0, 0.2, size=trained[k].shape).astype(np.float32)
    trained["score.weight"] = rng.normal(0, 0.3, size=(1, c["d_model"])).astype(np.float32)
    lora_path = os.path.join(work, "lora.h5")
    write_checkpoint(lora_path, dict(raw, reward=REWARD, lora=LORA), trained, tok_json, base=base_path)
    scale = LORA["alpha"] / LORA["r"]
    return [("full", full_path, ft.to_params(dict(params, **{"score.weight": full_head}), {}, 0.0), c),
            ("lora", lora_path, ft.to_params(params, trained, scale), c)]


def reference_scores(c, P, tok, lines, T):
    """{line number: {"chosen", "rejected"} or {"reward"}} by the reference; and the cut sides."""
    out, cut = {}, 0
    for number, line in enumerate(lines, start=1):
        if line is None:
            continue
        keys = ["completion"] if "completion" in line else ["chosen", "rejected"]
        sides = []
        for k in keys:
            ids, flags = ar.render_side(tok, {"prompt": line["prompt"], "chosen": line[k]}, "chosen")
            cut += len(ids) > T + 1
            sides.append(ar.cut_side(ids, flags, T))
        r = ar.side_scores(c, P, sides, T).tolist()
        out[number] = {"reward": r[0]} if keys == ["completion"] else {"chosen": r[0], "rejected": r[1]}
    return out, cut


def compare(ember_out, expected):
    """(worst error relative to the largest |score|, failures)."""
    got = [json.loads(x) for x in ember_out.splitlines() if x.strip()]
    if [g["line"] for g in got] != sorted(expected):
        return 0.0, [f"line numbers {[g['line'] for g in got]}, expected {sorted(expected)}"]
    scale = max(abs(v) for e in expected.values() for v in e.values())
    worst, bad = 0.0, []
    for g in got:
        e = expected[g["line"]]
        if set(g) - {"line"} != set(e):
            bad.append(f"line {g['line']}: keys {sorted(g)}, expected {sorted(e)}")
            continue
        for k, v in e.items():
            err = abs(g[k] - v) / scale
            worst = max(worst, err)
            if err > TOL:
                bad.append(f"line {g['line']} {k}: {g[k]:.9g} vs {v:.9g} (rel {err:.1e})")
    return worst, bad


# ----------------------------------------------------------------------------
# The Hugging Face export (docs/interop.md#reward-models)

# The configs of each class a reward model exports as (hf_reward_arch_for): a Llama one, the
# qk-norm one above (README's default model, configs/dense-small.json, has qk_norm), an MoE one.
EXPORTS = [("llama", dict(CONFIG, qk_norm=False, tie_embeddings=False), "LlamaForSequenceClassification"),
           ("qwen3", CONFIG, "Qwen3ForSequenceClassification"),
           ("qwen3_moe", dict(CONFIG, moe=dict(n_experts=3, top_k=2, expert_hidden=16, every=2)),
            "Qwen3MoeForSequenceClassification")]
# Learned positions: the GPT-2 class, whose sequence classifier is not an export target.
GPT2 = dict(d_model=32, n_layers=1, n_heads=4, ffn_hidden=48, norm="layernorm", pos="learned",
            ffn_act="gelu_tanh", bias=True, max_seq_len=40)


def check_export(ember, work, tok_json, vocab):
    """Exports a full and a LoRA (merged) reward model of each of EXPORTS; returns the failures."""
    data = os.path.join(work, "export.jsonl")
    lines = [x for x in LINES if x is not None][:6]
    with open(data, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    bad = []
    for seed, (key, conf, cls) in enumerate(EXPORTS):
        bad += check_export_of(ember, work, tok_json, vocab, key, conf, cls, seed, data, lines)
    return bad + check_refusals(ember, work, tok_json, vocab)


def check_export_of(ember, work, tok_json, vocab, key, conf, cls, seed, data, lines):
    """The full and the LoRA reward model of config conf: their folders, and each side's score
    from the folder alone against ember reward --score."""
    tok = ft.Tokenizer(tok_json)
    raw = dict(conf, vocab_size=vocab)
    c = ref.resolve_config(raw)
    params = ref.random_params(c, seed=6 + seed, std=0.3)
    rng = np.random.default_rng(12 + seed)
    base = os.path.join(work, f"{key}_base.h5")
    write_checkpoint(base, raw, params, tok_json)
    full = os.path.join(work, f"{key}_full.h5")
    write_checkpoint(full, dict(raw, reward=REWARD),
                     dict(params, **{"score.weight": rng.normal(0, 0.3, size=(1, c["d_model"]))}), tok_json)
    trained = {k: rng.normal(0, 0.2, size=v.shape) for k, v in ft.init_adapters(c, ["q", "v"], 4).items()}
    trained["score.weight"] = rng.normal(0, 0.3, size=(1, c["d_model"]))
    lora = os.path.join(work, f"{key}_lora.h5")
    write_checkpoint(lora, dict(raw, reward=REWARD, lora=LORA), trained, tok_json, base=base)
    bad = []
    for name, path in ((f"{key} full", full), (f"{key} lora", lora)):
        out = os.path.join(work, "hf_" + name.replace(" ", "_"))
        cf.run([ember, "export", "--checkpoint", path, "--format", "hf", "--out", out])
        bad += check_folder(name, out, c, vocab, tok, cls)
        p, _ = cf.run([ember, "reward", "--score", "--checkpoint", path, "--data", data])
        got = [json.loads(x) for x in p.stdout.splitlines()]

        with open(os.path.join(out, "config.json")) as f:
            cfg = json.load(f)
        w = hf.Weights(hf.read_safetensors(os.path.join(out, "model.safetensors")))
        worst, failed = 0.0, len(bad)
        for g, line in zip(got, lines):
            keys = ["completion"] if "completion" in line else ["chosen", "rejected"]
            for k in keys:
                ids, flags = ar.render_side(tok, {"prompt": line["prompt"], "chosen": line[k]}, "chosen")
                ids = ar.cut_side(ids, flags, conf["max_seq_len"])[0][:conf["max_seq_len"]]
                padded = ids + [cfg["pad_token_id"]] * 3  # a batch row padded after its ids
                for row in (ids, padded):
                    r = hf.sequence_classification(cfg, w, row)[0][0]
                    e = g["reward" if k == "completion" else k]
                    worst = max(worst, abs(r - e) / max(1.0, abs(r)))
                    if abs(r - e) > TOL * max(1.0, abs(r)):
                        bad.append(f"export {name} line {g['line']} {k}: HF float64 {r:.9g} vs ember {e:.9g}")
        print(f"  {'FAIL' if len(bad) > failed else 'PASS'} export {name} ({cls}): {len(got)} lines, score "
              f"from the exported safetensors (and padded rows) vs ember reward --score, worst {worst:.1e}")
    return bad


def check_folder(name, out, c, vocab, tok, cls):
    """config.json and the keys and shapes of model.safetensors."""

    with open(os.path.join(out, "config.json")) as f:
        cfg = json.load(f)
    bad = []
    want = {"architectures": [cls], "num_labels": 1, "id2label": {"0": "LABEL_0"},
            "label2id": {"LABEL_0": 0}, "pad_token_id": tok.special_id(ft.IM_START),
            "tie_word_embeddings": False, "vocab_size": vocab, "hidden_size": c["d_model"]}
    bad += [f"export {name}: config.json {k} = {cfg.get(k)!r}, expected {v!r}" for k, v in want.items()
            if cfg.get(k) != v]
    shapes = {k: v[0] for k, v in hf.read_safetensors(os.path.join(out, "model.safetensors")).items()}
    expected = {k: list(v) for k, v in ref.param_shapes(c) if k != "lm_head.weight"}
    expected["score.weight"] = [1, c["d_model"]]
    if shapes != expected:
        bad.append(f"export {name}: tensors {sorted(set(shapes) ^ set(expected))} differ, or shapes")
    if os.path.exists(os.path.join(out, "generation_config.json")):
        bad.append(f"export {name}: a generation_config.json (a reward model does not generate)")
    return bad


def check_refusals(ember, work, tok_json, vocab):
    """import of an exported folder, and export of a reward model with learned positions: one line,
    exit 1."""
    raw = dict(GPT2, vocab_size=vocab)
    c = ref.resolve_config(raw)
    gpt2 = os.path.join(work, "gpt2_full.h5")
    write_checkpoint(gpt2, dict(raw, reward=REWARD),
                     dict(ref.random_params(c, seed=9), **{"score.weight": np.ones((1, c["d_model"]))}), tok_json)
    bad = []
    cases = [([ember, "import", "--from", os.path.join(work, "hf_qwen3_full"), "--out",
               os.path.join(work, "back.h5")],
              '"Qwen3ForSequenceClassification" is a sequence classifier (a reward model\'s export)'),
             ([ember, "export", "--checkpoint", gpt2, "--format", "hf", "--out", os.path.join(work, "hf_gpt2")],
              'config key "pos" = "learned": a reward model exports as the sequence classifier of a RoPE class')]
    for cmd, text in cases:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ok = p.returncode == 1 and p.stderr.count("\n") == 1 and text in p.stderr
        ok &= not os.path.exists(cmd[-1])
        print(f"  {'PASS' if ok else 'FAIL'} {cmd[1]} refused: {p.stderr.strip()}")
        if not ok:
            bad.append(f"{' '.join(cmd[1:2])}: exit {p.returncode}, {p.stderr!r}")
    return bad


def main():
    started = cf.fresh_work_with_chat_tokenizer(__doc__)
    if started is None:
        return 2
    ember, work, tok_json, vocab = started
    tok = ft.Tokenizer(tok_json)
    data = os.path.join(work, "score.jsonl")
    with open(data, "w") as f:
        for line in LINES:
            f.write((json.dumps(line) if line else "  ") + "\n")
    T = CONFIG["max_seq_len"]
    print(f"ember reward --score vs float64 reference (align_reference.side_scores): tol {TOL:g} "
          "relative to the largest |score|")
    all_ok = True
    for name, path, P, c in make_checkpoints(work, tok_json, vocab):
        expected, cut = reference_scores(c, P, tok, LINES, T)
        assert cut >= 3, f"only {cut} sides longer than T + 1"
        for batch in ("3", "1"):
            p = subprocess.run([ember, "reward", "--score", "--checkpoint", path, "--data", data, "--batch-size",
                                batch], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if p.returncode != 0:
                print(f"  FAIL {name} --batch-size {batch}: exit {p.returncode}: {p.stderr.strip()}")
                all_ok = False
                continue
            worst, bad = compare(p.stdout, expected)
            all_ok &= not bad
            print(f"  {'FAIL' if bad else 'PASS'} {name} --batch-size {batch}: {len(expected)} lines, "
                  f"{cut} sides cut, worst {worst:.1e}")
            for b in bad:
                print(f"    {b}")
    bad = check_export(ember, work, tok_json, vocab)
    for b in bad:
        print(f"    {b}")
    all_ok &= not bad
    print("PASS" if all_ok else "FAIL")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
