#!/usr/bin/python3
"""Write examples/chat/fortunes_chat.jsonl, the example chat data set of `ember finetune`.

Conversations in the JSONL messages form of docs/formats.md#chat-data-jsonl, built from Debian's
fortunes (/usr/share/games/fortunes, the corpus the main job pretrains on) and from
arithmetic: "Who said: <quote>" -> "That was <name>.", "Finish this fortune: <first
half>" -> the rest, "Tell me a fortune about <topic>." -> a short fortune of that file,
"What is 37 + 45?" -> "37 + 45 = 82.", and multi-turn conversations mixing them, some
with a system message. Answers are short and formulaic so that a small pretrained
model learns them in a few hundred LoRA steps. Each fortune is used at most once, so a
held-out share of the conversations (`ember finetune --val-fraction`) holds unseen quotes.

Deterministic: Python 3 standard library only, seeded; the same fortunes give the same
bytes. Usage: python3 tools/make_chat_example.py [--fortunes DIR] [--out FILE] [--seed N]
"""
import argparse
import json
import os
import random
import re

NAME_RE = re.compile(r"^[A-Z][A-Za-z.'-]*( [A-Z][A-Za-z.'-]*){1,3}$")
TOPICS = {"computers": "computers", "food": "food", "love": "love", "science": "science",
          "law": "the law", "medicine": "medicine", "pets": "pets", "sports": "sports",
          "politics": "politics", "education": "education", "kids": "kids", "linux": "Linux",
          "literature": "books", "startrek": "Star Trek", "magic": "magic", "work": "work",
          "songs-poems": "songs", "wisdom": "wisdom", "drugs": "drugs", "news": "the news"}
SYSTEMS = ["You are Ember, a small assistant that knows fortune cookies. Answer briefly.",
           "You are a helpful assistant. Keep every answer to one sentence.",
           "Answer like a fortune cookie: short and to the point."]
# (kind, how many): one conversation each
PLAN = [("who", 420), ("finish", 280), ("topic", 170), ("arith", 650), ("multi", 180)]


def read_fortunes(root):
    """(file name, text, attribution or None) for every ASCII fortune, files in name order."""
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
            body = lines if cut is None else lines[:cut]
            who = None if cut is None else " ".join(l.strip() for l in lines[cut:])[3:].strip()
            quote = " ".join(" ".join(body).split())
            if quote:
                out.append((name, quote, who))
    return out


def person(who):
    """The bare name of an attribution ("Mark Twain, \"...\"" -> "Mark Twain"), or None."""
    if not who:
        return None
    name = re.split(r"[,(\"]", who)[0].strip().rstrip(".")
    return name if NAME_RE.match(name) else None


def split_half(quote, rng):
    """Cut a quote at a space near its middle: (first half, rest)."""
    words = quote.split(" ")
    k = max(2, min(len(words) - 2, len(words) // 2 + rng.randint(-1, 1)))
    return " ".join(words[:k]), " ".join(words[k:])


def turn_who(f, rng):
    q = rng.choice(["Who said: {}", "Who said this? {}", "Who wrote: {}"])
    return q.format(f[1]), "That was {}.".format(person(f[2]))


def turn_finish(f, rng):
    first, rest = split_half(f[1], rng)
    q = rng.choice(["Finish this fortune: {} ...", "Complete the saying: {} ..."])
    return q.format(first), "... " + rest


def turn_topic(f, rng):
    q = rng.choice(["Tell me a fortune about {}.", "Give me a saying about {}.", "A fortune about {}, please."])
    return q.format(TOPICS[f[0]]), f[1]


def turn_arith(rng):
    op = rng.choice("+++--*")
    if op == "*":
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        r = a * b
    else:
        a, b = rng.randint(0, 99), rng.randint(0, 99)
        if op == "-" and b > a:
            a, b = b, a
        r = a + b if op == "+" else a - b
    q = rng.choice(["What is {} {} {}?", "Compute {} {} {}.", "How much is {} {} {}?"])
    return q.format(a, op, b), "{} {} {} = {}.".format(a, op, b, r)


def pools(fortunes, rng):
    """Disjoint shuffled pools of fortunes for each kind of question."""
    short = [f for f in fortunes if 20 <= len(f[1]) <= 160]
    rng.shuffle(short)
    who = [f for f in short if person(f[2])]
    counts = {}
    for f in who:
        counts[person(f[2])] = counts.get(person(f[2]), 0) + 1
    who = [f for f in who if counts[person(f[2])] >= 8]  # names the data set repeats
    used = {id(f) for f in who}
    finish = [f for f in fortunes if 60 <= len(f[1]) <= 200 and len(f[1].split()) >= 8 and id(f) not in used]
    rng.shuffle(finish)
    used |= {id(f) for f in finish}
    topic = [f for f in short if f[0] in TOPICS and id(f) not in used]
    return {"who": who, "finish": finish, "topic": topic}


def conversations(fortunes, seed):
    rng = random.Random(seed)
    pool = pools(fortunes, rng)
    makers = {"who": turn_who, "finish": turn_finish, "topic": turn_topic}

    def turn(kind):
        if kind == "arith":
            return turn_arith(rng)
        return makers[kind](pool[kind].pop(), rng)

    convs = []
    for kind, n in PLAN:
        for _ in range(n):
            msgs = []
            if kind == "multi" or rng.random() < 0.15:
                msgs.append({"role": "system", "content": rng.choice(SYSTEMS)})
            kinds = [kind] if kind != "multi" else [rng.choice(["who", "finish", "topic", "arith", "arith"])
                                                   for _ in range(rng.randint(2, 3))]
            for k in kinds:
                q, a = turn(k)
                msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            convs.append({"messages": msgs})
    rng.shuffle(convs)
    return convs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--fortunes", default="/usr/share/games/fortunes")
    p.add_argument("--out", default=os.path.join(here, "..", "examples", "chat", "fortunes_chat.jsonl"))
    p.add_argument("--seed", type=int, default=16)
    a = p.parse_args()
    convs = conversations(read_fortunes(a.fortunes), a.seed)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w", encoding="ascii", newline="\n") as f:
        for c in convs:
            f.write(json.dumps(c, ensure_ascii=True, separators=(", ", ": ")) + "\n")
    print(f"{a.out}: {len(convs)} conversations, {os.path.getsize(a.out)} bytes")


if __name__ == "__main__":
    main()
