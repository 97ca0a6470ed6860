#!/usr/bin/python3
"""Write examples/rl/, the example prompts of `ember rl`.

Prompts in the chat form of docs/formats.md#rl-prompts-jsonl:
- arithmetic_sft.jsonl and arithmetic.jsonl: the 2500 sums a + b with a and b in 0..49, shuffled
  (seeded) and cut in two, in the question forms of the chat example (examples/chat/), whose
  fine-tuned model answers "What is 13 + 4?" in the form "13 + 4 = 17." (but mostly with other
  numbers). The first 1000 are conversations for a cold-start fine-tune that teaches the form
  and some addition:
      {"messages": [{"role": "user", "content": "What is 13 + 4?"},
                    {"role": "assistant", "content": "13 + 4 = 17."}]}
  the other 1500 are RL prompts, never seen by that fine-tune; "answer" is the right answer in
  that form, so that `--reward match` rewards a completion that states the sum rightly and
  `val_exact` is the held-out greedy answers' exact-match accuracy:
      {"prompt": [{"role": "user", "content": "What is 13 + 4?"}], "answer": "13 + 4 = 17."}
  `ember rl --val-fraction` holds a seeded share of them out.
- fortune_prompts.jsonl: the prompts of the example preference pairs (examples/align/
  fortune_pairs.jsonl: who said a fortune, a fortune in the case asked for, one-digit sums),
  without answers, for a run scored by the reward model trained on those pairs.

Deterministic: Python 3 standard library only, seeded. Regenerate with
    python3 tools/make_rl_example.py
Options: [--out-dir DIR] [--pairs FILE] [--seed N] [--max N] [--sft N]
"""
import argparse
import json
import os
import random

FORMS = ["What is {} + {}?", "Compute {} + {}.", "How much is {} + {}?"]


def sums(largest, rng):
    """Every (a, b) with a, b in 0..largest, each with a question form, shuffled."""
    out = [(a, b, rng.choice(FORMS)) for a in range(largest + 1) for b in range(largest + 1)]
    rng.shuffle(out)
    return out


def conversation(a, b, form):
    return {"messages": [{"role": "user", "content": form.format(a, b)},
                         {"role": "assistant", "content": "{} + {} = {}.".format(a, b, a + b)}]}


def rl_prompt(a, b, form):
    return {"prompt": [{"role": "user", "content": form.format(a, b)}],
            "answer": "{} + {} = {}.".format(a, b, a + b)}


def pair_prompts(path):
    with open(path, encoding="ascii") as f:
        return [{"prompt": json.loads(line)["prompt"]} for line in f if line.strip()]


def write(path, lines):
    with open(path, "w", encoding="ascii") as f:
        for line in lines:
            f.write(json.dumps(line) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default="examples/rl")
    ap.add_argument("--pairs", default="examples/align/fortune_pairs.jsonl")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--max", type=int, default=49, help="largest addend")
    ap.add_argument("--sft", type=int, default=1000, help="sums written as cold-start conversations")
    a = ap.parse_args()
    os.makedirs(a.out_dir, exist_ok=True)
    all_sums = sums(a.max, random.Random(a.seed))
    if not 0 < a.sft < len(all_sums):
        ap.error("--sft must leave sums on both sides (1..{})".format(len(all_sums) - 1))
    write(os.path.join(a.out_dir, "arithmetic_sft.jsonl"), [conversation(*s) for s in all_sums[:a.sft]])
    write(os.path.join(a.out_dir, "arithmetic.jsonl"), [rl_prompt(*s) for s in all_sums[a.sft:]])
    write(os.path.join(a.out_dir, "fortune_prompts.jsonl"), pair_prompts(a.pairs))


if __name__ == "__main__":
    main()
