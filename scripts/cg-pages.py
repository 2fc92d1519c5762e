#!/usr/bin/env python3
"""Counts, per object and per function, the jumps and calls that leave their 4 KiB page, and
lists a function's hot path as runs of consecutive hot instructions with the jumps between
them.

    scripts/cg-pages.py FILE.callgrind OPS                  # per object, top functions
    scripts/cg-pages.py FILE.callgrind OPS FUNCTION [MIN]   # FUNCTION's hot runs and jumps

FILE must come from `valgrind --tool=callgrind --dump-instr=yes --collect-jumps=yes`
(`scripts/rxe-callgrind.sh` with `RXE_CG_OPTS="--dump-instr=yes --collect-jumps=yes"`).
Figures are executions divided by OPS. FUNCTION is a regular expression on callgrind's
function names; MIN (default OPS) is the executions an instruction needs to be hot.

Why: under TCG (the Soft-RoCE VM) a direct jump is chained to its target only within the
page its translation block starts on; any other jump, like every return and indirect call,
goes through a look-up of the target's block, which callgrind counts as one instruction.
Where a function's hot path lies across its pages depends on the layout the compiler chose
(cold blocks between hot ones), which this shows deterministically (session 20, BENCHMARKS.md).
"""

import collections
import re
import sys

PAGE = 12


def name(s, table):
    """A compressed callgrind name: `(id) name` defines it, `(id)` refers to it."""
    m = re.match(r"\((\d+)\)(?: (.*))?", s)
    if not m:
        return s
    if m.group(2) is not None:
        table[m.group(1)] = m.group(2)
    return table[m.group(1)]


def position(tok, last):
    if tok == "*":
        return last
    if tok[0] in "+-":
        return last + int(tok, 0)
    return int(tok, 0)


def parse(path):
    """Yields (kind, object, function, source, target, count) for every jump and call, and
    ('ins', object, function, address, None, count) for every instruction's cost line."""
    obs, fns = {}, {}
    ob = fn = cob = None
    last = 0
    pending = None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if not line:
            continue
        c = line[0]
        if c.isdigit() or c in "+-*":
            toks = line.split()
            a = position(toks[0], last)
            last = a
            if pending:
                kind, n, target, tob = pending
                pending = None
                yield kind, ob, fn, a, (tob, target), n
            elif len(toks) >= 3:
                yield "ins", ob, fn, a, None, int(toks[2])
            continue
        key, _, val = line.partition("=")
        if key == "ob":
            ob = name(val, obs).split("/")[-1]
        elif key == "fn":
            fn = name(val, fns)
        elif key == "cob":
            cob = name(val, obs).split("/")[-1]
        elif key == "cfn":
            name(val, fns)
        elif key in ("jump", "jcnd"):
            t = val.split()
            pending = ("jump", int(t[0].split("/")[0]), position(t[1], last), ob)
        elif key == "calls":
            t = val.split()
            pending = ("call", int(t[0]), position(t[1], last), cob or ob)
            cob = None


def summary(path, ops):
    jumps, xjumps = collections.Counter(), collections.Counter()
    calls, xcalls = collections.Counter(), collections.Counter()
    per_fn = collections.Counter()
    for kind, ob, fn, src, tgt, n in parse(path):
        if kind == "ins":
            continue
        tob, target = tgt
        cross = tob == ob and (src >> PAGE) != (target >> PAGE)
        if kind == "jump":
            jumps[ob] += n
            xjumps[ob] += n if cross else 0
        else:
            calls[ob] += n
            xcalls[ob] += n if cross else 0
        if cross:
            per_fn[(ob, fn)] += n
    print(f"{'object':28s} {'jumps':>8s} {'across':>7s} {'calls':>7s} {'across':>7s}  (per op)")
    for o in sorted(set(jumps) | set(calls)):
        if jumps[o] + calls[o] < ops:
            continue
        print(
            f"{o:28s} {jumps[o] / ops:8.1f} {xjumps[o] / ops:7.2f} "
            f"{calls[o] / ops:7.1f} {xcalls[o] / ops:7.2f}"
        )
    print("functions by jumps and calls to another page of their object, per op:")
    for (o, f), n in per_fn.most_common(15):
        if n / ops >= 0.2:
            print(f"  {n / ops:6.2f} {o} {f[:110]}")


def hot_path(path, ops, pattern, hot):
    want = re.compile(pattern)
    counts = collections.Counter()
    moves = []
    for kind, ob, fn, src, tgt, n in parse(path):
        if not (fn and want.search(fn)):
            continue
        if kind == "ins":
            counts[src] += n
        elif n >= hot:
            moves.append((kind, src, tgt[1], n))
    addrs = sorted(a for a, n in counts.items() if n >= hot)
    if not addrs:
        print("no hot instruction")
        return
    print(f"{len(addrs)} hot instructions, {sum(counts[a] for a in addrs) / ops:.1f} per op")
    start = prev = addrs[0]
    for a in addrs[1:] + [None]:
        if a is None or a - prev > 16:
            pages = f"{start >> PAGE:#x}" + ("" if start >> PAGE == prev >> PAGE else f"-{prev >> PAGE:#x}")
            print(f"  run {start:#x}-{prev:#x} page {pages} x{counts[start]}")
            start = a
        prev = a if a is not None else prev
    for kind, src, target, n in moves:
        if kind == "call" or (src >> PAGE) != (target >> PAGE):
            print(f"  {kind} {src:#x} -> {target:#x} x{n}")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, ops = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 3:
        hot = int(sys.argv[4]) if len(sys.argv) > 4 else ops
        hot_path(path, ops, sys.argv[3], hot)
    else:
        summary(path, ops)


if __name__ == "__main__":
    main()
