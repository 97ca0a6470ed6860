#!/usr/bin/env python3
"""End-to-end check of `ember export --format hf` and `ember import` (CTest hf_check).

For tiny models of each Hugging Face architecture (trained a few steps at a high
learning rate so that norms, biases and routers are far from their initial values):
  1. `ember train` -> checkpoint; `ember export --format hf` -> folder;
  2. tools/hf_reference.py (pure Python, from the transformers modeling code) computes
     the logits from the folder alone; ember's logits come from tests/hf/hf_logits;
     they must agree to TOL relative to the largest logit;
  3. `ember import` of the folder gives a checkpoint whose logits are bit-identical
     (and which `ember train --init-from` accepts);
  4. unmappable configs, corrupt or missing files: non-zero exit, one stderr line
     naming the key or file, no output written.

    hf_check.py EMBER HF_LOGITS CORPUS WORKDIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import hf_reference  # noqa: E402

# float32 against float64: the observed error is ~4e-7; 2e-5 leaves a wide margin and still
# catches e.g. an attention scale off by 1% (5e-4) or RoPE left out (4e-3).
TOL = 2e-5
IDS = [1, 17, 200, 5, 99, 42, 255, 0]

BASE = {"d_model": 32, "n_layers": 2, "n_heads": 4, "max_seq_len": 16, "qk_norm": False}
CASES = [
    # name, expected class, config overrides
    ("llama_gqa_untied", "LlamaForCausalLM",
     {"vocab_size": 256, "n_kv_heads": 2, "ffn_hidden": 48, "tie_embeddings": False}),
    ("llama_bias_geglu_headdim", "LlamaForCausalLM",
     {"vocab_size": 300, "n_heads": 4, "n_kv_heads": 2, "head_dim": 16, "ffn_act": "geglu",
      "ffn_hidden": 40, "bias": True, "rope_theta": 500.0, "norm_eps": 1e-6}),
    ("qwen3_mqa", "Qwen3ForCausalLM",
     {"vocab_size": 300, "n_kv_heads": 1, "ffn_hidden": 48, "qk_norm": True}),
    ("qwen3_moe_every2", "Qwen3MoeForCausalLM",
     {"vocab_size": 300, "n_kv_heads": 2, "ffn_hidden": 48, "qk_norm": True, "tie_embeddings": False,
      "moe": {"n_experts": 4, "top_k": 2, "expert_hidden": 24, "every": 2, "norm_topk_prob": False}}),
    ("qwen3_moe_geglu", "Qwen3MoeForCausalLM",
     {"vocab_size": 256, "ffn_act": "geglu", "ffn_hidden": 48, "qk_norm": True,
      "moe": {"n_experts": 3, "top_k": 2, "expert_hidden": 16, "every": 1, "norm_topk_prob": True}}),
    ("gpt2_tied", "GPT2LMHeadModel",
     {"vocab_size": 300, "norm": "layernorm", "pos": "learned", "ffn_act": "gelu_tanh", "bias": True,
      "ffn_hidden": 64}),
    ("gpt2_untied_gelu", "GPT2LMHeadModel",
     {"vocab_size": 256, "norm": "layernorm", "pos": "learned", "ffn_act": "gelu", "bias": True,
      "tie_embeddings": False, "dropout": 0.1, "z_loss_coef": 1e-4}),
]
# configs with no exact Hugging Face equivalent: (name, overrides, key the error must name);
# the whole list of such keys is tests/apps/test_hf_format.cpp's, this checks the command line.
UNMAPPABLE = [
    ("softcap", {"attn_softcap": 20.0}, "attn_softcap"),
]


def run(cmd, ok=True):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if ok and p.returncode != 0:
        sys.exit("FAILED: %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p


def train(ember, corpus, work, name, overrides, steps=4):
    cfg = dict(BASE, **overrides)
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    out = os.path.join(work, name)
    cmd = [ember, "train", "--config", path, "--data", corpus, "--steps", str(steps), "--batch-size", "2",
           "--seq-len", "8", "--lr", "0.03", "--min-lr", "0.03", "--warmup", "0", "--weight-decay", "0",
           "--out", out, "--log-every", "1000", "--sample-tokens", "0", "--seed", "7"]
    if cfg["vocab_size"] > 256:
        cmd += ["--vocab-size", str(cfg["vocab_size"])]
    run(cmd)
    return os.path.join(out, "step_%08d.h5" % steps)


def ember_logits(helper, ckpt, ids):
    return json.loads(run([helper, ckpt] + [str(i) for i in ids]).stdout)["logits"]


def expect_error(cmd, needle, must_not_exist=None):
    p = run(cmd, ok=False)
    lines = p.stderr.strip().splitlines()
    good = p.returncode != 0 and len(lines) == 1 and needle in lines[0]
    if must_not_exist and os.path.exists(must_not_exist):
        good = False
    print("  %-4s %s -> %s" % ("ok" if good else "FAIL", " ".join(os.path.basename(c) for c in cmd[1:3]),
                               lines[0] if lines else "(no stderr, exit %d)" % p.returncode))
    return good


def check_models(ember, helper, corpus, work):
    ok = True
    print("logits of the exported folder (pure-Python transformers reference) vs ember, tol %g relative" % TOL)
    for name, arch, overrides in CASES:
        t0 = time.time()
        ckpt = train(ember, corpus, work, name, overrides)
        folder = os.path.join(work, name + "_hf")
        run([ember, "export", "--checkpoint", ckpt, "--format", "hf", "--out", folder])
        ids = [i % overrides["vocab_size"] for i in IDS]
        got_arch, ref = hf_reference.logits(folder, ids)
        mine = ember_logits(helper, ckpt, ids)
        scale = max(abs(v) for row in ref for v in row)
        err = max(abs(a - b) for ra, rb in zip(mine, ref) for a, b in zip(ra, rb)) / scale
        # round trip: import gives a checkpoint with bit-identical logits, usable by --init-from
        back = os.path.join(work, name + "_back.h5")
        run([ember, "import", "--from", folder, "--out", back])
        same = ember_logits(helper, back, ids) == mine
        if name == CASES[0][0]:  # valid for --init-from (docs/formats.md#checkpoints)
            run([ember, "train", "--init-from", back, "--data", corpus, "--steps", "1", "--batch-size", "1",
                 "--seq-len", "8", "--out", os.path.join(work, name + "_ft"), "--sample-tokens", "0"])
        good = got_arch == arch and err <= TOL and same and len(mine) == len(ids)
        ok &= good
        print("  %-4s %-26s %-20s max |logit| %.3g, rel err %.2e, import round trip %s (%.1f s)" % (
            "ok" if good else "FAIL", name, got_arch, scale, err, "identical" if same else "DIFFERS",
            time.time() - t0))
    return ok


def check_errors(ember, corpus, work):
    ok = True
    print("errors: one stderr line naming the key or file, non-zero exit")
    for name, overrides, key in UNMAPPABLE:
        ckpt = train(ember, corpus, work, "bad_" + name, dict(overrides, vocab_size=256), steps=1)
        out = os.path.join(work, "bad_" + name + "_hf")
        ok &= expect_error([ember, "export", "--checkpoint", ckpt, "--format", "hf", "--out", out],
                           '"%s"' % key, must_not_exist=out)
    good = os.path.join(work, "llama_gqa_untied_hf")
    # corrupt header length, truncated data, a config key that changes the math, missing folder
    for what in ("header", "truncated", "rope_scaling", "missing"):
        folder = os.path.join(work, "corrupt_" + what)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.copytree(good, folder)
        st = os.path.join(folder, "model.safetensors")
        needle = "model.safetensors"
        if what == "header":
            with open(st, "r+b") as f:
                f.write(struct.pack("<Q", 1 << 40))
        elif what == "truncated":
            with open(st, "r+b") as f:
                f.truncate(os.path.getsize(st) - 4)
        elif what == "rope_scaling":
            cfg_path = os.path.join(folder, "config.json")
            with open(cfg_path) as f:
                cfg = json.load(f)
            cfg["rope_scaling"] = {"rope_type": "linear", "factor": 2.0}
            with open(cfg_path, "w") as f:
                json.dump(cfg, f)
            needle = "rope_scaling"
        else:
            shutil.rmtree(folder)
            needle = folder
        out = os.path.join(work, "corrupt_" + what + ".h5")
        ok &= expect_error([ember, "import", "--from", folder, "--out", out], needle, must_not_exist=out)
    return ok


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    ember, helper, corpus, work = sys.argv[1:]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    ok = check_models(ember, helper, corpus, work)
    ok &= check_errors(ember, corpus, work)
    print("hf_check:", "PASSED" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
