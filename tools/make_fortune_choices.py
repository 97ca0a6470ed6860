#!/usr/bin/python3
"""Write examples/eval/fortune_continuations.jsonl, the example task file of `ember evaluate`.

Multiple-choice items in the form of docs/cli.md#evaluating, built from Debian's fortunes
(/usr/share/games/fortunes, the corpus the main job pretrains on): the context is the
first half of a fortune (cut at a space near its middle, the space going to the
continuations, as lm-evaluation-harness's tasks write them), the choices are its real
second half and the second halves of three other fortunes of similar length (within
a factor 1.5), in a shuffled order; gold is the real one's index (chance 1/4).
Fortunes are ASCII, 80 to 240 characters after white space is collapsed, attributions
("-- Name") dropped; each fortune is used once, as a context or as a distractor.

Deterministic: Python 3 standard library only, seeded; the same fortunes give the same
bytes. Usage: python3 tools/make_fortune_choices.py [--fortunes DIR] [--out FILE]
[--items N] [--seed N]
"""
import argparse
import json
import os
import random
import re


def read_fortunes(root):
    """The text of every usable fortune, files in name order."""
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if "." in name or os.path.islink(path) or not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            raw = f.read()
        for chunk in raw.split(b"\n%\n"):
            try:
                text = chunk.decode("ascii")
            except UnicodeDecodeError:
                continue
            if "\b" in text or "\x1b" in text:  # overstriking, escapes
                continue
            lines = text.strip("\n").split("\n")
            cut = next((i for i, l in enumerate(lines) if re.match(r"^\s+-- ", l)), None)
            body = " ".join((lines if cut is None else lines[:cut]))
            quote = " ".join(body.split())
            if 80 <= len(quote) <= 240:
                out.append(quote)
    return out


def split_half(quote):
    """(first half, rest): cut at the space nearest the middle; the rest starts with it."""
    middle = len(quote) // 2
    spaces = [i for i, c in enumerate(quote) if c == " "]
    cut = min(spaces, key=lambda i: (abs(i - middle), i))
    return quote[:cut], quote[cut:]


def make_items(fortunes, n_items, rng):
    halves = [split_half(q) for q in sorted(set(fortunes))]
    rng.shuffle(halves)
    contexts, pool = halves[:n_items], halves[n_items:]
    used = set()
    items = []
    for context, real in contexts:
        fits = [i for i, (_, rest) in enumerate(pool)
                if i not in used and len(real) / 1.5 <= len(rest) <= len(real) * 1.5 and rest != real]
        picked = rng.sample(fits, 3)
        used.update(picked)
        choices = [real] + [pool[i][1] for i in picked]
        rng.shuffle(choices)
        items.append({"context": context, "choices": choices, "gold": choices.index(real)})
    return items


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fortunes", default="/usr/share/games/fortunes")
    ap.add_argument("--out", default="examples/eval/fortune_continuations.jsonl")
    ap.add_argument("--items", type=int, default=200)
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()
    items = make_items(read_fortunes(args.fortunes), args.items, random.Random(args.seed))
    with open(args.out, "w", encoding="ascii") as f:
        for item in items:
            f.write(json.dumps(item) + "\n")
    print(f"wrote {args.out}: {len(items)} items, 4 choices each")


if __name__ == "__main__":
    main()
