#!/usr/bin/python3
"""Check `ember align` and `ember reward` against the independent float64 reference
(align_reference.py).

Usage: /usr/bin/python3 tools/check_align.py PATH/TO/ember WORK_DIR

A small BPE tokenizer (`ember tokenize --train`, the ChatML tokens appended), a base checkpoint
with random weights (check_finetune.py's), preference pairs in the chat form (a system message,
an earlier exchange, a pair cut at T+1 ids, a dropped pair) and in the text form; for each loss
(dpo, ipo, simpo, orpo; dpo with --label-smoothing, simpo with --sft-weight) `ember align --full
--sequential --val-fraction 0 --grad-accum 2` for 3 steps and the reference's replay of the
same run (`align_reference.py --full --out-json`). Compared per step (docs/model.md#loss-of-an-alignment-step,
docs/cli.md#alignment): loss and gradient norm within 1e-5 relative, rewards/chosen,
rewards/rejected and rewards/margins within 1e-5 absolute (differences of float32 sums), and
rewards/accuracy exactly. Then `ember reward` with --center-rewards and margins on some lines,
--grad-accum 2, --full on the chat pairs (a cut pair, a dropped pair) and LoRA on q,v,down on
the text pairs: loss, gradient norm and margin within 1e-4 relative, accuracy exactly
(docs/model.md#reward-model). Exits non-zero when any comparison fails.
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_finetune as cf  # noqa: E402
import spec_reference as ref  # noqa: E402

REL_TOL, ABS_TOL = 1e-5, 1e-5
RUN = ["--steps", "3", "--batch-size", "2", "--grad-accum", "2", "--seq-len", "64", "--lr", "1e-3",
       "--min-lr", "1e-4", "--warmup", "1", "--weight-decay", "0.1", "--clip", "1.0"]
CONFIG = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=48, qk_norm=True, max_seq_len=96)
USER = lambda text: [{"role": "user", "content": text}]  # noqa: E731
SAY = lambda text: [{"role": "assistant", "content": text}]  # noqa: E731
CHAT = [
    {"prompt": USER("Who said: the cat sat on a mat?"), "chosen": SAY("That was a dog."),
     "rejected": SAY("That was the hat.")},
    {"prompt": [{"role": "system", "content": "You answer in one line."}] + USER("two plus three?"),
     "chosen": SAY("five"), "rejected": SAY("two plus three is six")},
    {"prompt": USER("a hat?") + SAY("on the cat") + USER("and the dog?"), "chosen": SAY("at night"),
     "rejected": SAY("  the mat")},
    {"prompt": USER("the dogs bark at night while the cat sat on a mat and ran to its hat"),
     "chosen": SAY("nobody said what the dogs said at night while the cat sat"), "rejected": SAY("who")},
    {"prompt": USER(" ".join(["the cat sat on a mat"] * 12)), "chosen": SAY("dropped"), "rejected": SAY("too")},
    {"prompt": USER("five"), "chosen": SAY("is two plus three"), "rejected": SAY("is a cat")},
]
TEXT = [
    {"prompt": "the cat sat on", "chosen": " a mat", "rejected": " the dogs"},
    {"prompt": "two plus three is", "chosen": " five", "rejected": " six and the hat"},
    {"prompt": "who said what at night", "chosen": "? the dogs bark", "rejected": "? a cat"},
    {"prompt": "the hat", "chosen": " ran to its cat while dogs bark at night", "rejected": " sat"},
]
CASES = [("dpo", CHAT, ["--label-smoothing", "0.1"]), ("ipo", CHAT, []),
         ("simpo", TEXT, ["--sft-weight", "0.5"]), ("orpo", CHAT, [])]
KEYS = ["loss", "grad_norm", "rewards/chosen", "rewards/rejected", "rewards/margins", "rewards/accuracy"]
# ember reward (one form per file): the chat pairs (a system message, an earlier exchange, a pair
# cut at T+1 ids, a dropped pair) with --full, the text-form pairs with LoRA; margins on some
# lines; --center-rewards > 0.
CHAT_MARGINS = [dict(p, margin=m) if m is not None else p for p, m in zip(CHAT, [0.5, None, -0.25, None, 1.0, None])]
TEXT_MARGINS = [dict(TEXT[0], margin=0.75)] + TEXT[1:]
REWARD_CASES = [("reward_full", CHAT_MARGINS, ["--full", "--center-rewards", "0.05"]),
                ("reward_lora", TEXT_MARGINS, ["--center-rewards", "0.1", "--lora-targets", "q,v,down"])]
REWARD_KEYS = ["loss", "grad_norm", "margin", "accuracy"]
REWARD_REL_TOL = 1e-4


def compare(ember_log, ref_log):
    """(worst relative error of loss / grad norm, worst absolute of the rewards, failures)."""
    bad, worst_rel, worst_abs = [], 0.0, 0.0
    if len(ember_log) != len(ref_log):
        return 0.0, 0.0, [f"{len(ember_log)} ember steps vs {len(ref_log)} reference steps"]
    for e, r in zip(ember_log, ref_log):
        for k in KEYS:
            x, y = float(e[k]), float(r[k])
            if k in ("loss", "grad_norm"):
                err = abs(x - y) / max(abs(x), abs(y), 1e-12)
                worst_rel = max(worst_rel, err)
                if err > REL_TOL:
                    bad.append(f"step {e['step']} {k}: {x:.9g} vs {y:.9g} (rel {err:.1e})")
            else:
                err = abs(x - y)
                worst_abs = max(worst_abs, err)
                if err > (0 if k == "rewards/accuracy" else ABS_TOL):
                    bad.append(f"step {e['step']} {k}: {x:.9g} vs {y:.9g} (abs {err:.1e})")
    return worst_rel, worst_abs, bad


def compare_reward(ember_log, ref_log):
    """(worst relative error, failures): loss, grad norm and margin within REWARD_REL_TOL relative
    (the margin, a difference of scores, against at least 1e-3), accuracy exactly."""
    bad, worst = [], 0.0
    if len(ember_log) != len(ref_log):
        return 0.0, [f"{len(ember_log)} ember steps vs {len(ref_log)} reference steps"]
    for e, r in zip(ember_log, ref_log):
        for k in REWARD_KEYS:
            x, y = float(e[k]), float(r[k])
            err = abs(x - y) / max(abs(x), abs(y), 1e-3 if k == "margin" else 1e-12)
            if k == "accuracy":
                if x != y:
                    bad.append(f"step {e['step']} accuracy: {x} vs {y}")
                continue
            worst = max(worst, err)
            if err > REWARD_REL_TOL:
                bad.append(f"step {e['step']} {k}: {x:.9g} vs {y:.9g} (rel {err:.1e})")
    return worst, bad


def check_reward(ember, d, base_path, name, lines, extra):
    """`ember reward` and the reference's replay of it; the reference starts from the score head
    (and adapters) of a 1-step run at --lr 1e-30, which leaves every float32 weight as drawn."""
    data = os.path.join(d, f"{name}.jsonl")
    with open(data, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    out, start = os.path.join(d, name), os.path.join(d, name + "_start")
    common = [ember, "reward", "--base", base_path, "--data", data, "--sequential", "--val-fraction", "0"]
    cf.run(common + ["--out", start, "--steps", "1", "--lr", "1e-30", "--min-lr", "0", "--weight-decay", "0",
                     "--seq-len", "64"] + extra)
    cf.run(common + ["--out", out] + RUN + extra)
    records = cf.metrics_records(out)
    ember_log = [records[s] for s in sorted(records) if "loss" in records[s]]
    ref_json = os.path.join(d, f"{name}_reference.jsonl")
    cf.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "align_reference.py"),
            "--reward", "--base", base_path, "--data", data, "--out-json", ref_json,
            "--adapters", os.path.join(start, "step_00000001.h5")] + RUN + extra)
    ref_log = [json.loads(x) for x in open(ref_json) if x.strip()]
    return compare_reward(ember_log, ref_log)


def check_case(ember, d, base_path, loss, lines, extra):
    data = os.path.join(d, f"{loss}.jsonl")
    with open(data, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    out = os.path.join(d, loss)
    cf.run([ember, "align", "--base", base_path, "--data", data, "--out", out, "--full", "--sequential",
            "--val-fraction", "0", "--loss", loss] + RUN + extra)
    records = cf.metrics_records(out)
    ember_log = [records[s] for s in sorted(records) if "loss" in records[s]]
    ref_json = os.path.join(d, f"{loss}_reference.jsonl")
    cf.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "align_reference.py"),
            "--base", base_path, "--data", data, "--out-json", ref_json, "--full", "--loss", loss]
           + RUN + extra)
    ref_log = [json.loads(x) for x in open(ref_json) if x.strip()]
    return compare(ember_log, ref_log)


def main():
    started = cf.fresh_work_with_chat_tokenizer(__doc__)
    if started is None:
        return 2
    ember, work, tok_json, vocab = started
    raw = dict(CONFIG, vocab_size=vocab)
    base_path = os.path.join(work, "base.h5")
    cf.write_base(base_path, raw, ref.random_params(ref.resolve_config(raw), seed=5, std=0.3), tok_json)
    print(f"ember align --full vs float64 reference: loss and grad norm tol {REL_TOL:g} relative, "
          f"rewards {ABS_TOL:g} absolute, accuracy exact")
    all_ok = True
    for loss, lines, extra in CASES:
        try:
            worst_rel, worst_abs, bad = check_case(ember, work, base_path, loss, lines, extra)
        except Exception as e:  # noqa: BLE001
            print(f"  FAIL {loss}: {e}")
            all_ok = False
            continue
        all_ok &= not bad
        print(f"  {'FAIL' if bad else 'PASS'} {loss} {' '.join(extra)}: loss/grad norm rel {worst_rel:.1e}, "
              f"rewards abs {worst_abs:.1e}")
        for b in bad:
            print(f"    {b}")
    print(f"ember reward vs float64 reference: loss, grad norm and margin tol {REWARD_REL_TOL:g} relative, "
          "accuracy exact")
    for name, lines, extra in REWARD_CASES:
        try:
            worst, bad = check_reward(ember, work, base_path, name, lines, extra)
        except Exception as e:  # noqa: BLE001
            print(f"  FAIL {name}: {e}")
            all_ok = False
            continue
        all_ok &= not bad
        print(f"  {'FAIL' if bad else 'PASS'} {name} {' '.join(extra)}: rel {worst:.1e}")
        for b in bad:
            print(f"    {b}")
    print("PASS" if all_ok else "FAIL")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
