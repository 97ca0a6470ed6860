#!/usr/bin/env python3
"""Functions under 80 lines (docs/architecture.md#what-a-file-may-include): reports every
function body in the C++ sources (*.h, *.cpp) of the library, apps, benches, tools and examples
longer than --max lines, counted from the line of its opening brace to that of its closing brace.

Run: python3 tests/check_function_length.py [--root <source folder>] [--max 80]
Exits 1 naming file:line, function and length of each; 0 when every body fits.

A function is a brace block at namespace or class scope whose header (the text before `{`
since the previous `;`, `{` or `}`) has a parameter list and is not a class, struct, union,
enum, namespace or initializer; everything inside it (control blocks, lambdas, local classes)
is part of it. Comments, string and character literals (raw strings too) and preprocessor
lines are blanked before braces are matched. A body that is mostly data (a table of presets
or test rows) is exempt when the comment `function-length: table` stands on the line above
its header or on any line from the header to its opening brace; each exemption honoured is
listed.
"""
import argparse
import bisect
import os
import re
import sys

FOLDERS = ["core", "autograd", "nn", "inference", "optim", "data", "dist", "apps", "bench", "tools",
           "examples"]
EXTENSIONS = (".h", ".cpp")
MARKER = "function-length: table"
SCOPE_KEYWORDS = {"class", "struct", "union", "enum", "namespace", "extern"}
CONTROL_KEYWORDS = {"if", "for", "while", "switch", "catch", "do", "else", "try"}
NOT_A_NAME = {"decltype", "alignas", "__attribute__", "__declspec", "noexcept", "requires",
              "sizeof", "static_assert"}
RAW_STRING = re.compile(r'(?:u8|u|U|L)?R"([^()\\ \t\n]{0,16})\(')
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def blank(text):
    """Returns text of the same length and lines with comments, string and character literals
    (their quotes kept) and preprocessor lines turned into spaces."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True  # only whitespace since the last newline outside a comment or literal

    def clear(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if line_start and c == "#":  # a directive, with its backslash-continued lines
            j = i
            while j < n and text[j] != "\n":
                if text.startswith("/*", j):  # a comment inside the directive may span lines
                    end = text.find("*/", j + 2)
                    j = n if end < 0 else end + 2
                    continue
                if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            clear(i, j)
            i = j
            continue
        line_start = False
        if text.startswith("//", i):
            j = i
            while j < n and text[j] != "\n":  # a line comment continues past a trailing backslash
                j += 2 if text[j] == "\\" and j + 1 < n and text[j + 1] == "\n" else 1
            clear(i, j)
            i = j
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            j = n if end < 0 else end + 2
            clear(i, j)
            i = j
            continue
        raw = RAW_STRING.match(text, i) if c in "uULR" else None
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, raw.end())
            j = n if end < 0 else end + len(close)
            clear(i + 1, j - 1)
            i = j
            continue
        if c == '"' or (c == "'" and not digit_separator(text, i)):
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            clear(i + 1, min(j, n))
            i = j + 1
            continue
        i += 1
    return "".join(out)


def digit_separator(text, i):
    """True when the quote at i separates digits of a number (1'000'000), not a char literal."""
    j = i
    while j > 0 and (text[j - 1].isalnum() or text[j - 1] in "_'."):
        j -= 1
    return j < i and text[j].isdigit()


def matching_brace(text, i):
    """The index of the `}` closing the `{` at i in blanked text (len(text) when unclosed)."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def strip_template_prefix(header):
    """The header without leading `template <...>` clauses and [[attributes]]."""
    while True:
        header = header.lstrip()
        if header.startswith("[["):
            end = header.find("]]")
            header = header[end + 2:] if end >= 0 else ""
            continue
        m = re.match(r"template\s*<", header)
        if not m:
            return header
        depth = 0
        for k in range(m.end() - 1, len(header)):
            if header[k] == "<":
                depth += 1
            elif header[k] == ">":
                depth -= 1
                if depth == 0:
                    header = header[k + 1:]
                    break
        else:
            return ""


OPERATOR_SYMBOL = re.compile(r"\boperator\s*(<<=|>>=|<=>|<<|>>|<=|>=|->\*?|<|>|\(\s*\)|\[\s*\])")


def top_level(header):
    """Yields (index, char) of header's characters outside (), [], {} and <...> (the symbols of
    operator<, operator() and the like are no brackets)."""
    header = OPERATOR_SYMBOL.sub(
        lambda m: m.group(0)[:-len(m.group(1))] + "@" * len(m.group(1)), header)
    depth = 0
    angle = 0
    for k, ch in enumerate(header):
        if ch in "([{":
            if depth == 0 and angle == 0:
                yield k, ch
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and ch == "<" and not header.startswith(("<<", "<="), k):
            angle += 1
        elif depth == 0 and ch == ">" and angle > 0 and header[k - 1] != "-":
            angle -= 1
        elif depth == 0 and angle == 0:
            yield k, ch


def assignment_at(header):
    """The index of the header's top-level `=` (an initializer), or -1."""
    for k, ch in top_level(header):
        if ch != "=":
            continue
        before = header[k - 1] if k > 0 else ""
        after = header[k + 1] if k + 1 < len(header) else ""
        if before in "=!<>+-*/%&|^" or after == "=":
            continue  # a comparison or compound operator
        if re.search(r"\boperator\s*\S*$", header[:k]):
            continue  # operator=, operator+=, ...
        return k
    return -1


def parameter_list_at(header):
    """The index of the `(` opening the header's parameter list, or -1 when it has none."""
    for k, ch in top_level(header):
        if ch != "(":
            continue
        before = header[:k].rstrip()
        word = IDENTIFIER.findall(before[-40:])
        if word and word[-1] in NOT_A_NAME and before.endswith(word[-1]):
            continue
        return k
    return -1


def function_name(header, paren):
    """The qualified name before the parameter list (operator names and ~destructors too)."""
    before = header[:paren].rstrip()
    m = re.search(r"((?:[A-Za-z_][A-Za-z_0-9]*\s*(?:<[^<>;{}]*>)?\s*::\s*)*~?\s*"
                  r"(?:operator\s*(?:\(\s*\)|\[\s*\]|[^\sA-Za-z_0-9(]+|[A-Za-z_][\w:<> ]*)"
                  r"|[A-Za-z_][A-Za-z_0-9]*))$", before)
    name = m.group(1) if m else before.split()[-1] if before.split() else "?"
    return re.sub(r"\s+", "", name)


def classify(header):
    """'scope' (namespace, class, ...), 'function' with its name, or 'data' for any other block."""
    text = strip_template_prefix(header)
    words = IDENTIFIER.findall(text)
    lead = [w for w in words[:3] if w not in ("typedef", "inline", "export", "static")]
    if lead and lead[0] in SCOPE_KEYWORDS and not (lead[0] == "extern" and "(" in text):
        named = lead[0] in ("class", "struct", "union") and len(lead) > 1
        return "scope", lead[1] if named and lead[1] not in ("alignas", "final") else None
    if words and words[0] in CONTROL_KEYWORDS:
        return "data", None
    eq = assignment_at(text)
    if eq >= 0:
        rhs = text[eq + 1:].lstrip()
        if rhs.startswith("["):  # a lambda held by a variable at namespace or class scope
            var = IDENTIFIER.findall(text[:eq])
            return "function", "lambda " + (var[-1] if var else "?")
        return "data", None
    paren = parameter_list_at(text)
    if paren < 0:
        return "data", None
    return "function", function_name(text, paren)


def constructor_init_brace(header):
    """True when the `{` ending header brace-initializes a member or base in a constructor's
    initializer list (`Foo() : a_(1), b_{2}`), not the constructor's body."""
    text = strip_template_prefix(header)
    paren = parameter_list_at(text)
    if paren < 0:
        return False
    rest = text[paren:].rstrip()
    colon = re.search(r"(?<!:):(?!:)", rest)
    if not colon:
        return False
    return bool(re.search(r"[A-Za-z_0-9>]$", rest)) and not re.search(
        r"\b(const|override|final|noexcept|volatile|mutable|try)$", rest)


def functions_in(text):
    """Yields (name, header start, open brace, close brace) of each function in blanked text;
    a member function defined in its class is named Class::name."""
    n = len(text)
    start = 0
    paren = 0
    classes = []  # (closing brace, name) of the classes around i
    i = 0
    while i < n:
        while classes and classes[-1][0] < i:
            classes.pop()
        c = text[i]
        if c in "([":
            paren += 1
        elif c in ")]":
            paren = max(paren - 1, 0)
        elif c == ";" or c == "}":
            start = i + 1
            paren = 0
        elif c == "{":
            close = matching_brace(text, i)
            header = text[start:i]
            if paren > 0 or constructor_init_brace(header):
                i = close + 1  # a braced expression inside the header: still the same header
                continue
            kind, name = classify(header)
            if kind == "scope":
                if name:
                    classes.append((close, name))
                start = i + 1
            elif kind == "function":
                outer = [c_name for _, c_name in classes]
                yield "::".join(outer + [name]), start, i, close
                i, start = close + 1, close + 1
                continue
            else:
                i, start = close + 1, close + 1
                continue
        i += 1


def line_of(text, index, line_starts):
    """The 1-based line number of index."""
    return bisect.bisect_right(line_starts, index)


def check_file(root, rel, limit):
    """Returns (too long, exempted, needless exemptions): lists of (rel, line, name, length)."""
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        raw = f.read()
    text = blank(raw)
    starts = [0] + [m.end() for m in re.finditer("\n", raw)]
    raw_lines = raw.split("\n")
    long, exempt, needless = [], [], []
    for name, start, open_, close in functions_in(text):
        if close >= len(text):
            at = line_of(text, open_, starts)
            raise SyntaxError(f"{rel}:{at}: the brace of {name} never closes")
        first = start + len(text[start:open_]) - len(text[start:open_].lstrip())
        first_line = line_of(text, first, starts)
        open_line = line_of(text, open_, starts)
        close_line = line_of(text, min(close, len(text) - 1), starts)
        length = close_line - open_line + 1
        marked = any(MARKER in raw_lines[k - 1]
                     for k in range(max(first_line - 1, 1), open_line + 1))
        row = (rel, open_line, name, length)
        if marked:
            (exempt if length > limit else needless).append(row)
        elif length > limit:
            long.append(row)
    return long, exempt, needless


def sources(root):
    for folder in FOLDERS:
        top = os.path.join(root, folder)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(EXTENSIONS):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.join(here, ".."), help="the source folder")
    parser.add_argument("--max", type=int, default=80, help="the longest body allowed, in lines")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    files = list(sources(root))
    if not files:
        print(f"function_length: no *.h or *.cpp under {root} ({', '.join(FOLDERS)}): "
              "is --root the source folder?")
        return 1
    long, exempt, needless = [], [], []
    for rel in files:
        try:
            a, b, c = check_file(root, rel, args.max)
        except SyntaxError as e:
            print(f"function_length: {e.msg} (a brace this check mistook; fix the check)")
            return 1
        long += a
        exempt += b
        needless += c
    for rel, line, name, length in exempt:
        print(f"function_length: exempt as a table ({MARKER}): {rel}:{line} {name} "
              f"({length} lines)")
    for rel, line, name, length in needless:
        print(f"function_length: {rel}:{line} {name} is marked '{MARKER}' but has only "
              f"{length} lines: delete the marker")
    if long:
        print(f"function_length: {len(long)} function(s) longer than {args.max} lines (split "
              f"each into functions of one job; tests/check_function_length.py):")
        for rel, line, name, length in sorted(long, key=lambda r: (-r[3], r[0], r[1])):
            print(f"  {rel}:{line}: {name} has {length} lines")
        return 1
    print(f"function_length: every function in {len(files)} files under {root} has at most "
          f"{args.max} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
