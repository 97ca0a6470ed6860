#!/usr/bin/python3
"""Check `ember rl` against the independent float64 reference (rl_reference.py).

Usage: /usr/bin/python3 tools/check_rl.py PATH/TO/ember WORK_DIR

A small BPE tokenizer (`ember tokenize --train`, the ChatML tokens appended), a base checkpoint
with random weights (check_finetune.py's), prompt files with answers in the chat form and in the
text form (the base raises <|im_end|>'s logit so that chat completions often stop: the stop token
completes, trains and is left out of the reward's text); for each case `ember rl --reward match
--sequential --val-fraction 0` for 3 steps with
--rollouts-out, and the reference's replay of the same run from the dumped completions
(`rl_reference.py`): GRPO LoRA with --iterations 2, GRPO --full, PPO LoRA with a value head
drawn and --iterations 3, PPO --full, and PPO LoRA with --reward-model (a reward model trained
by `ember reward --full` for 3 steps: the scores, and the value head starting as its score head).
Low --clip-ratio and a high --lr make both branches of the surrogate (and of PPO's value clip)
occur. The tensors ember draws (LoRA A, the value head) come from a 1-step run at --lr 1e-30
with --weight-decay 0 (every float32 weight stays as drawn; B is taken as 0).
Compared (docs/model.md#rl-from-a-reward, docs/cli.md#rl-from-a-reward,
docs/formats.md#rl-prompts-jsonl):
  - per completion: the prompt ids as rendered, the match reward exactly (a reward model's score
    within TOL of max(1, |reference|)); logp_old per token and
    the advantage (grpo one, ppo one per token) within TOL of max(1, |reference|) (absolute for
    values below 1, relative above);
  - per step: loss, kl, clip_fraction, value_loss (ppo), reward, reward_std, completion_length,
    grad_norm, lr, prefilled_tokens (P + G - 1 per prompt) within TOL of max(1, |reference|);
    a step with a prompt whose first completion ends at its first token makes the engine
    recompute more of the prompt than docs/cli.md says: there prefilled_tokens >= P + G - 1, and
    a NOTE names the excess;
  - every trained tensor of the final checkpoint: |ember - reference|_2 (Frobenius) within TOL of
    max(1, |reference|_2); the largest element difference is printed (tensor_max_abs), not bounded:
    an element whose gradient is at float32's noise level gets a different Adam step (Adam divides
    by |g|), up to lr, on a few elements of a --full model.
Exits non-zero when any comparison fails. Measured: every difference below 3e-5 (PPO's whitened
advantages 2.9e-5, the final tensors 1.1e-5, logp_old 3.8e-6, the metrics 7e-6; the largest
element difference of a tensor 9.7e-5, of a --full one).
"""
import json
import os
import sys
import time

import h5py
import numpy as np

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_finetune as cf  # noqa: E402
import rl_reference as rl  # noqa: E402
import spec_reference as ref  # noqa: E402

TOL = 1e-4
STOP_BOOST = 3.0
CONFIG = dict(d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, ffn_hidden=48, qk_norm=True, max_seq_len=96)
USER = lambda text: [{"role": "user", "content": text}]  # noqa: E731
CHAT = [
    {"prompt": USER("two plus three?"), "answer": "wh"},
    {"prompt": [{"role": "system", "content": "You answer in one line."}] + USER("one plus one?"), "answer": "E"},
    {"prompt": USER("the cat sat") + [{"role": "assistant", "content": "on a mat"}] + USER("and the dogs?"),
     "answer": "wh"},
    {"prompt": USER("what is two plus two"), "answer": "v"},
]
TEXT = [
    {"prompt": "two plus three is", "answer": "wh"},
    {"prompt": "the cat sat on", "answer": "M"},
    {"prompt": "who said what at night", "answer": "wh"},
]
RUN = ["--steps", "3", "--batch-size", "2", "--lr", "2e-3", "--min-lr", "2e-4", "--warmup", "1",
       "--weight-decay", "0.1", "--clip", "1.0", "--temperature", "0.8", "--max-tokens", "6", "--seed", "3",
       "--beta1", "0.9", "--beta2", "0.95"]
LORA = ["--lora-r", "4", "--lora-alpha", "8", "--lora-targets", "q,v,down,head"]
CASES = [
    ("grpo_lora_it2", CHAT, ["--algo", "grpo", "--group-size", "4", "--iterations", "2", "--kl", "0.05",
                       "--clip-ratio", "0.05"] + LORA),
    ("grpo_full", TEXT, ["--algo", "grpo", "--group-size", "3", "--full", "--clip-ratio", "0.1"]),
    ("ppo_lora", CHAT, ["--algo", "ppo", "--group-size", "3", "--iterations", "3", "--kl", "0.1",
                        "--vf-coef", "0.5", "--clip-ratio", "0.05", "--lr", "1e-2"] + LORA),
    ("ppo_full", TEXT, ["--algo", "ppo", "--group-size", "2", "--full", "--iterations", "2", "--lr", "1e-2"]),
    ("ppo_lora_reward_model", CHAT, ["--algo", "ppo", "--group-size", "2", "--iterations", "2"] + LORA),
]
# The reward model of the last case: `ember reward --full` for 3 steps on chat pairs of these prompts.
RM_PAIRS = [{"prompt": USER("two plus three?"), "chosen": [{"role": "assistant", "content": "five"}],
             "rejected": [{"role": "assistant", "content": "the cat"}]},
            {"prompt": USER("one plus one?"), "chosen": [{"role": "assistant", "content": "two"}],
             "rejected": [{"role": "assistant", "content": "dogs bark at night"}]},
            {"prompt": USER("what is two plus two"), "chosen": [{"role": "assistant", "content": "two plus two is"}],
             "rejected": [{"role": "assistant", "content": "a hat"}]}]
RM_RUN = ["--full", "--steps", "3", "--batch-size", "2", "--seq-len", "48", "--lr", "1e-3", "--sequential",
          "--val-fraction", "0", "--seed", "4"]
STEP_KEYS = ["loss", "kl", "clip_fraction", "value_loss", "reward", "reward_std", "completion_length", "grad_norm",
             "lr", "prefilled_tokens"]


def stopping_params(raw, tok):
    """Random weights whose chat completions often stop: every embedding row gets +3 in column 0
    (the final norm's output then has a large, mostly positive coordinate 0) and <|im_end|>'s
    row STOP_BOOST more, which raises its logit (tied embeddings) by a few units. Text-form
    completions rarely stop (<|endoftext|> is not raised), so their rewards vary."""
    params = ref.random_params(ref.resolve_config(raw), seed=5, std=0.3)
    E = params["model.embed_tokens.weight"]
    E[:, 0] += 3.0
    for t in tok["added_tokens"]:
        if t["content"] == "<|im_end|>":
            E[t["id"], 0] += STOP_BOOST
    return params


def opt(args, name, default=None):
    return args[args.index(name) + 1] if name in args else default


def err_of(x, y):
    return float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64)) /
                        np.maximum(1.0, np.abs(np.asarray(y, np.float64)))))


def final_tensors(path):
    with h5py.File(path, "r") as f:
        return {k: f["model"][k][()].astype(np.float64) for k in f["model"]}


def compare(ember_log, ref_log, dumped, ember_final, ref_final, worst, bad, notes, reward_model):
    """Fill worst[quantity] and bad with the differences of one case."""
    def see(key, e, r, where):
        err = err_of(e, r)
        worst[key] = max(worst.get(key, 0.0), err)
        if not err <= TOL:
            bad.append(f"{where} {key}: ember {np.round(np.asarray(e, float), 7).tolist()} "
                       f"ref {np.round(np.asarray(r, float), 7).tolist()} (err {err:.1e})")
    if len(ember_log) != len(ref_log):
        bad.append(f"{len(ember_log)} ember steps vs {len(ref_log)} reference steps")
        return
    lines = iter(dumped)
    for e, r in zip(ember_log, ref_log):
        if r["prompt_mismatch"]:
            bad.append(f"{r['prompt_mismatch']} prompts rendered otherwise than ember's prompt_ids")
        if r["groups_done_at_first_token"] and "prefilled_tokens" in e:
            # a prompt whose first completion ends at its first token: the engine's siblings take
            # only its full KV blocks from the prefix cache and recompute the rest of the prompt
            # (inference/rollout/rollout.cpp), more than docs/cli.md's P + G - 1
            if e["prefilled_tokens"] < r["prefilled_tokens"]:
                bad.append(f"step {e['step']} prefilled_tokens: ember {e['prefilled_tokens']} < P + G - 1 per "
                           f"prompt = {r['prefilled_tokens']}")
            elif e["prefilled_tokens"] > r["prefilled_tokens"]:
                notes.append(f"step {e['step']} prefilled_tokens: ember {e['prefilled_tokens']:g}, docs/cli.md's "
                             f"P + G - 1 per prompt {r['prefilled_tokens']} ({r['groups_done_at_first_token']} "
                             "group(s) whose first completion ended at its first token)")
        for k in STEP_KEYS:
            if k == "prefilled_tokens" and r["groups_done_at_first_token"]:
                continue
            if k in r:
                if k not in e:
                    bad.append(f"step {e['step']}: no {k} in metrics.jsonl")
                    continue
                see(k, e[k], r[k], f"step {e['step']}")
        for i, row in enumerate(r["rows"]):
            d = next(lines)
            where = f"step {e['step']} completion {i}"
            if reward_model:
                see("score", d["reward"], row["reward"], where)
            elif d["reward"] != row["reward"]:
                bad.append(f"{where} reward: ember {d['reward']} ref {row['reward']}")
            see("logp_old", d["logp_old"], row["logp_old"], where)
            see("advantage", d["advantage"], row["advantage"], where)
    if set(ember_final) != set(ref_final):
        bad.append(f"trained tensors: ember {sorted(ember_final)} vs reference {sorted(ref_final)}")
    for k in sorted(set(ember_final) & set(ref_final)):
        e, r = ember_final[k], ref_final[k]
        err = float(np.linalg.norm(e - r) / max(1.0, np.linalg.norm(r)))
        worst["tensor"] = max(worst.get("tensor", 0.0), err)
        worst["tensor_max_abs"] = max(worst.get("tensor_max_abs", 0.0), float(np.abs(e - r).max()))
        if not err <= TOL:
            bad.append(f"final {k}: |ember - ref|_2 {np.linalg.norm(e - r):.2e} (|ref|_2 {np.linalg.norm(r):.2e}, "
                       f"max element difference {np.abs(e - r).max():.2e})")


def merged(run, extra):
    """RUN's options with those extra gives again replaced, then the rest of extra."""
    run, rest, i = list(run), [], 0
    while i < len(extra):
        if extra[i] in run and i + 1 < len(extra) and not extra[i + 1].startswith("--"):
            run[run.index(extra[i]) + 1] = extra[i + 1]
            i += 2
        else:
            rest.append(extra[i])
            i += 1
    return run + rest


def check_case(ember, d, base_path, name, lines, extra):
    args = merged(RUN, extra)
    prompts = os.path.join(d, f"{name}.jsonl")
    with open(prompts, "w") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")
    out, start = os.path.join(d, name), os.path.join(d, name + "_start")
    rollouts = os.path.join(d, name + "_rollouts.jsonl")
    reward_model = name.endswith("reward_model")
    reward = ["--reward", "match"]
    if reward_model:  # a reward model trained by ember reward; ppo's value head starts as its score head
        pairs = os.path.join(d, f"{name}_pairs.jsonl")
        with open(pairs, "w") as f:
            for line in RM_PAIRS:
                f.write(json.dumps(line) + "\n")
        cf.run([ember, "reward", "--base", base_path, "--data", pairs, "--out", os.path.join(d, name + "_rm")]
               + RM_RUN)
        reward = ["--reward-model", os.path.join(d, name + "_rm", "step_00000003.h5")]
    common = [ember, "rl", "--base", base_path, "--prompts", prompts, "--sequential", "--val-fraction", "0"] + reward
    full = "--full" in extra
    # the reference replaces the start's value.weight by the reward model's score.weight
    needs_start = not full or (opt(extra, "--algo") == "ppo" and not reward_model)
    if needs_start:  # the drawn tensors: adapters, value head
        start_args = list(args)
        for k, v in (("--steps", "1"), ("--lr", "1e-30"), ("--min-lr", "0"), ("--weight-decay", "0"),
                     ("--warmup", "0")):
            start_args[start_args.index(k) + 1] = v
        cf.run(common + ["--out", start] + start_args)
    _, secs = cf.run(common + ["--out", out, "--rollouts-out", rollouts] + args)
    records = cf.metrics_records(out)
    ember_log = [records[s] for s in sorted(records) if "loss" in records[s]]
    ref_json, ref_npz = os.path.join(d, name + "_reference.jsonl"), os.path.join(d, name + "_reference.npz")
    cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "rl_reference.py"),
           "--base", base_path, "--prompts", prompts, "--rollouts", rollouts, "--out-json", ref_json,
           "--out-tensors", ref_npz] + args + reward
    if needs_start:
        cmd += ["--start", os.path.join(start, "step_00000001.h5")]
    if rl.main(_reference_args(cmd)[2:]) != 0:  # in this process: torch is imported once
        raise RuntimeError("rl_reference.py failed")
    ref_log = [json.loads(x) for x in open(ref_json) if x.strip()]
    dumped = [json.loads(x) for x in open(rollouts) if x.strip()]
    ref_final = dict(np.load(ref_npz))
    ember_final = final_tensors(os.path.join(out, "step_00000003.h5"))
    worst, bad, notes = {}, [], []
    compare(ember_log, ref_log, dumped, ember_final, ref_final, worst, bad, notes, reward_model)
    rewards = [d_["reward"] for d_ in dumped]
    stopped = sum(1 for d_ in dumped if len(d_["completion_ids"]) < 6)
    info = (f"{len(dumped)} completions ({stopped} stopped early), mean reward {np.mean(rewards):.2f}, "
            f"clip_fraction {[round(r['clip_fraction'], 3) for r in ref_log]}"
            + (f", value clipped {[round(r['value_clipped'], 3) for r in ref_log]}" if "value_clipped" in ref_log[0]
               else "") + f", ember {secs:.1f}s")
    return worst, bad, notes, info


def _reference_args(cmd):
    """The reference takes the run's options except those of sampling (--max-tokens, --seed) and
    --lora-targets (its adapters come from --start)."""
    out, skip = [], False
    for a in cmd:
        if skip:
            skip = False
            continue
        if a in ("--max-tokens", "--seed", "--lora-targets"):
            skip = True
            continue
        out.append(a)
    return out


def main():
    t0 = time.time()
    started = cf.fresh_work_with_chat_tokenizer(__doc__)
    if started is None:
        return 2
    ember, work, tok_json, vocab = started
    print("reference self-test (tools/rl_reference.py --self-test)")
    rl.self_test()
    raw = dict(CONFIG, vocab_size=vocab)
    base_path = os.path.join(work, "base.h5")
    cf.write_base(base_path, raw, stopping_params(raw, json.loads(tok_json)), tok_json)
    print(f"ember rl vs float64 reference (tools/rl_reference.py): every quantity within {TOL:g} of "
          f"max(1, |reference|); final tensors: |ember - ref|_2 within {TOL:g} of max(1, |ref|_2)")
    all_ok, worst_all = True, {}
    for name, lines, extra in CASES:
        try:
            worst, bad, notes, info = check_case(ember, work, base_path, name, lines, extra)
        except Exception as e:  # noqa: BLE001
            print(f"  FAIL {name}: {e}")
            all_ok = False
            continue
        all_ok &= not bad
        for k, v in worst.items():
            worst_all[k] = max(worst_all.get(k, 0.0), v)
        print(f"  {'FAIL' if bad else 'PASS'} {name}: " + ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
        print(f"       {info}")
        for n in notes:
            print(f"    NOTE {n}")
        for b in bad[:20]:
            print(f"    {b}")
        if len(bad) > 20:
            print(f"    ... {len(bad) - 20} more")
    print("worst over the cases: " + ", ".join(f"{k} {v:.1e}" for k, v in worst_all.items()))
    print(f"{'PASS' if all_ok else 'FAIL'} ({time.time() - t0:.1f}s)")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
