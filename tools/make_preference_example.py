#!/usr/bin/python3
"""Write examples/align/, the example preference pairs of `ember align` and `ember reward`.

Pairs in the chat form of docs/formats.md (a prompt of messages ending with a user message,
one assistant message as chosen and one as rejected), built from Debian's fortunes
(/usr/share/games/fortunes, parsed as tools/make_chat_example.py does) and from sums, in the
answer forms of the chat example (examples/chat/), so that its fine-tuned model starts
from the right form and only has to learn which answer is the better one. The chosen answer
is stated in the prompt, the rejected one is not: the pairs teach an answer faithful to its
context (the default 3.3M model recalls no authors, and its fine-tune on examples/chat/ does not
copy them from the prompt either: it is at chance, see docs/align.md):
- who:    "A fortune: <quote> -- <name>\nWho said it?" -> "That was <name>." against another
          author (authors quoted at least 8 times, drawn in proportion to their quotes);
- case:   "<fortune>\nRepeat it in capital letters." (or "in small letters") -> the fortune in
          that case against it in the other (fortunes of 20 to 60 characters): an answer that
          follows the instruction (the ending of a fortune, copied from the prompt, was the
          earlier second kind: the default model learns it barely above chance, docs/align.md);
- sum:    "What is 3 + 4?" -> "3 + 4 = 7." against the same sum off by 1 to 3 (digits 0-9).
A tenth of the prompts open with a system message, another tenth with an earlier exchange.
Three files: examples/align/fortune_pairs.jsonl (training), fortune_pairs_heldout.jsonl
(the same kinds on fortunes used nowhere else, none of them in examples/chat/, so a model
fine-tuned on the chat example has not seen them either; the sums are the same 100 questions
with other wrong answers) and examples/eval/fortune_preferences_mc.jsonl, the held-out pairs
as `ember evaluate` items (docs/cli.md#evaluating): the context is the prompt rendered in
ChatML up to "<|im_start|>assistant\\n", the two choices are the answers followed by
"<|im_end|>" in a shuffled order (chance 0.5), and "kind" names the kind.

Deterministic: Python 3 standard library only, seeded; the same fortunes (Debian 12's) and
the same examples/chat/fortunes_chat.jsonl give the same bytes. Regenerate with
    python3 tools/make_preference_example.py
Options: [--fortunes DIR] [--chat FILE] [--out-dir DIR] [--mc FILE] [--seed N]
"""
import argparse
import json
import os
import random
import sys

sys.dont_write_bytecode = True  # keep tools/ free of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_chat_example import SYSTEMS, person, read_fortunes  # noqa: E402

# (kind, training pairs, held-out pairs)
PLAN = [("who", 500, 80), ("case", 500, 80), ("sum", 500, 80)]
IM_START, IM_END = "<|im_start|>", "<|im_end|>"


def chat_text(path):
    """Every message of the chat example, joined: a fortune whose first 30 characters occur in it is taken."""
    with open(path, encoding="ascii") as f:
        return "\n".join(m["content"] for line in f for m in json.loads(line)["messages"])


def pools(fortunes, chat, rng):
    """Shuffled pools per kind: fortunes for training, and disjoint ones outside the chat example."""
    seen = set()
    unique = []
    for f in fortunes:  # a quote found in two files is one fortune
        if f[1] not in seen:
            seen.add(f[1])
            unique.append(f)
    short = [f for f in unique if 20 <= len(f[1]) <= 160]
    counts = {}
    for f in short:
        if person(f[2]):
            counts[person(f[2])] = counts.get(person(f[2]), 0) + 1
    who = [f for f in short if person(f[2]) and counts[person(f[2])] >= 8 and len(f[1]) <= 110]
    taken = {f[1] for f in who}
    case = [f for f in unique if 20 <= len(f[1]) <= 60 and "\n" not in f[1] and f[1] not in taken]
    out = {}
    for kind, pool in (("who", who), ("case", case)):
        rng.shuffle(pool)
        fresh = [f for f in pool if f[1][:30] not in chat]
        n_held = dict((k, h) for k, _, h in PLAN)[kind]
        held = fresh[:n_held]
        held_set = {f[1] for f in held}
        out[kind] = ([f for f in pool if f[1] not in held_set], held)
    return out


def ask_who(f, pool, rng):
    right = person(f[2])
    wrong = right
    while wrong == right:
        wrong = person(rng.choice(pool)[2])  # another author, in proportion to the authors' quotes
    q = "A fortune: {} -- {}\nWho said it?".format(f[1], right)
    return q, "That was {}.".format(right), "That was {}.".format(wrong)


def ask_case(f, rng):
    """The fortune in the case the prompt asks for, against it in the other."""
    upper = rng.random() < 0.5
    q = "{}\nRepeat it in {} letters.".format(f[1], "capital" if upper else "small")
    big, small = f[1].upper(), f[1].lower()
    return (q, big, small) if upper else (q, small, big)


def ask_sum(rng):
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    s = a + b
    wrong = s + rng.choice([d for d in (-3, -2, -1, 1, 2, 3) if s + d >= 0])
    q = rng.choice(["What is {} + {}?", "Compute {} + {}.", "How much is {} + {}?"]).format(a, b)
    return q, "{} + {} = {}.".format(a, b, s), "{} + {} = {}.".format(a, b, wrong)


def opening(rng):
    """Messages before the question: none, a system message, or an earlier exchange."""
    u = rng.random()
    if u < 0.1:
        return [{"role": "system", "content": rng.choice(SYSTEMS)}]
    if u < 0.2:
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return [{"role": "user", "content": "What is {} + {}?".format(a, b)},
                {"role": "assistant", "content": "{} + {} = {}.".format(a, b, a + b)}]
    return []


def make_pairs(kind, fortunes, pool, rng):
    """One pair per fortune (per count for sums), in the order of the list."""
    pairs = []
    for f in fortunes:
        if kind == "who":
            q, good, bad = ask_who(f, pool, rng)
        elif kind == "case":
            q, good, bad = ask_case(f, rng)
        else:
            q, good, bad = ask_sum(rng)
        prompt = opening(rng) + [{"role": "user", "content": q}]
        pairs.append({"prompt": prompt, "chosen": [{"role": "assistant", "content": good}],
                      "rejected": [{"role": "assistant", "content": bad}]})
    return pairs


def build(fortunes, chat, seed):
    """(training pairs, held-out pairs, held-out pairs' kinds), each list shuffled."""
    rng = random.Random(seed)
    pool = pools(fortunes, chat, rng)
    train, held, kinds = [], [], []
    for kind, n_train, n_held in PLAN:
        if kind == "sum":
            t_src, h_src = [None] * n_train, [None] * n_held
        else:
            t_src, h_src = pool[kind][0][:n_train], pool[kind][1]
            assert len(t_src) == n_train and len(h_src) == n_held, (kind, len(t_src), len(h_src))
        # rejected answers come from the same split: no held-out text in the training file
        train += make_pairs(kind, t_src, t_src, rng)
        held_pairs = make_pairs(kind, h_src, h_src, rng)
        held += held_pairs
        kinds += [kind] * len(held_pairs)
    rng.shuffle(train)
    order = list(range(len(held)))
    rng.shuffle(order)
    return train, [held[i] for i in order], [kinds[i] for i in order], rng


def chatml(messages):
    """docs/formats.md's ChatML of messages followed by the generation prompt."""
    text = "".join("{}{}\n{}{}\n".format(IM_START, m["role"], m["content"], IM_END) for m in messages)
    return text + IM_START + "assistant\n"


def mc_items(pairs, kinds, rng):
    items = []
    for p, kind in zip(pairs, kinds):
        good = p["chosen"][0]["content"] + IM_END
        bad = p["rejected"][0]["content"] + IM_END
        choices = [good, bad] if rng.random() < 0.5 else [bad, good]
        items.append({"context": chatml(p["prompt"]), "choices": choices, "gold": choices.index(good),
                      "kind": kind})
    return items


def write_jsonl(path, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="ascii", newline="\n") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=True, separators=(", ", ": ")) + "\n")
    print(f"{os.path.relpath(path)}: {len(rows)} lines, {os.path.getsize(path)} bytes")


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fortunes", default="/usr/share/games/fortunes")
    p.add_argument("--chat", default=os.path.join(root, "examples", "chat", "fortunes_chat.jsonl"))
    p.add_argument("--out-dir", default=os.path.join(root, "examples", "align"))
    p.add_argument("--mc", default=os.path.join(root, "examples", "eval", "fortune_preferences_mc.jsonl"))
    p.add_argument("--seed", type=int, default=34)
    a = p.parse_args()
    train, held, kinds, rng = build(read_fortunes(a.fortunes), chat_text(a.chat), a.seed)
    write_jsonl(os.path.join(a.out_dir, "fortune_pairs.jsonl"), train)
    write_jsonl(os.path.join(a.out_dir, "fortune_pairs_heldout.jsonl"), held)
    write_jsonl(a.mc, mc_items(held, kinds, rng))


if __name__ == "__main__":
    main()
