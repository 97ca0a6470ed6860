#!/usr/bin/python3
"""Write examples/rl/, the example prompts of `ember rl`.

Prompts in the chat form of docs/formats.md#rl-prompts-jsonl:
- arithmetic.jsonl: every sum a + b with a and b in 0..19, once each, in the question forms of the
  chat example (examples/chat/), whose fine-tuned model answers "What is 13 + 4?" in the form
  "13 + 4 = 17." (but mostly with other numbers); "answer" is the right result as that form
  states it, "= 17.", so that `--reward match` rewards a completion that states the right sum
  and the held-out share with reward 1 is the accuracy of the greedy answers' results:
      {"prompt": [{"role": "user", "content": "What is 13 + 4?"}], "answer": "= 17."}
  `ember rl --val-fraction` holds a seeded share of them out.
- fortune_prompts.jsonl: the prompts of the example preference pairs (examples/align/
  fortune_pairs.jsonl: who said a fortune, a fortune in the case asked for, one-digit sums),
  without answers, for a run scored by the reward model trained on those pairs.

Deterministic: Python 3 standard library only, seeded. Regenerate with
    python3 tools/make_rl_example.py
Options: [--out-dir DIR] [--pairs FILE] [--seed N] [--max N]
"""
import argparse
import json
import os
import random

FORMS = ["What is {} + {}?", "Compute {} + {}.", "How much is {} + {}?"]


def sums(largest, rng):
    out = []
    for a in range(largest + 1):
        for b in range(largest + 1):
            out.append({"prompt": [{"role": "user", "content": rng.choice(FORMS).format(a, b)}],
                        "answer": "= {}.".format(a + b)})
    rng.shuffle(out)
    return out


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
    ap.add_argument("--max", type=int, default=19, help="largest addend")
    a = ap.parse_args()
    write(os.path.join(a.out_dir, "arithmetic.jsonl"), sums(a.max, random.Random(a.seed)))
    write(os.path.join(a.out_dir, "fortune_prompts.jsonl"), pair_prompts(a.pairs))


if __name__ == "__main__":
    main()
