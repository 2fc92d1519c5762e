#!/usr/bin/env python3
"""Counts, per object and in all, the executions of the kinds of instruction the instruction
count does not weigh: atomic read-modify-writes (`lock`-prefixed, `xchg` with memory), indirect
calls and jumps, returns, direct calls and system calls.

    scripts/cg-kinds.py FILE.callgrind OPS [MIN]

FILE must come from `valgrind --tool=callgrind --dump-instr=yes` (per-instruction counts; with
`scripts/rxe-callgrind.sh`, `RXE_CG_OPTS=--dump-instr=yes`). Each figure is executions divided
by OPS; only instructions executed at least MIN times (default 1000) count, so that setup
code drops out. The objects are disassembled with objdump on this machine, which must hold
the same files at the same paths (the rxe VM shares the checkout and runs the host's Debian
release).

Why: an atomic operation costs about 20 cycles on hardware (8 ns on this host) and a return
or an indirect jump a translation-block lookup under TCG (11-30 ns in the Soft-RoCE VM), while
callgrind counts each as one instruction (dat-provider-verbs/README.md, session 13).
"""

import collections
import re
import subprocess
import sys

KINDS = ("atomic", "icall", "ijmp", "ret", "call", "syscall")


def parse(path):
    """Executions per (object, address): the self cost of each instruction (one Ir per
    execution), not the inclusive cost callgrind writes after a `calls=` line."""
    counts = collections.defaultdict(collections.Counter)
    names = {}
    ob = None
    addr = 0
    after_call = False
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("positions:") and "instr" not in line.split():
                sys.exit(f"{path}: no per-instruction counts (run callgrind with --dump-instr=yes)")
            if line.startswith(("ob=", "cob=")):
                m = re.match(r"c?ob=\((\d+)\)(?: (.*))?", line.strip())
                if m and m.group(2):
                    names[m.group(1)] = m.group(2)
                if m and line.startswith("ob="):
                    ob = names.get(m.group(1))
                continue
            if line.startswith("calls="):
                after_call = True
                continue
            if not line or line[0] not in "+-*0":
                continue
            parts = line.split()
            if len(parts) < 3:
                continue
            a = parts[0]
            if a[0] == "+":
                addr += int(a[1:], 0)
            elif a[0] == "-":
                addr -= int(a[1:], 0)
            elif a != "*":
                addr = int(a, 16)
            if after_call:
                after_call = False
                continue
            counts[ob][addr] += int(parts[2])
    return counts


def kind(ins):
    ins = re.sub(r"^(bnd|notrack) ", "", ins)
    if ins.startswith("lock ") or re.match(r"xchg\s+%\w+,\s*\S*\(", ins):
        return "atomic"
    if re.match(r"call\s+\*", ins):
        return "icall"
    if re.match(r"jmp\s+\*", ins):
        return "ijmp"
    if ins.startswith("ret"):
        return "ret"
    if ins.startswith("call"):
        return "call"
    if ins.startswith("syscall"):
        return "syscall"
    return None


def instructions(obj):
    """The instructions of `obj` as objdump disassembles them: (address, the function's symbol,
    the instruction's text)."""
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", obj], capture_output=True, text=True, check=False
    ).stdout
    fn = "?"
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            fn = m.group(1)
            continue
        m = re.match(r"\s*([0-9a-f]+):\s+(.*)", line)
        if m:
            yield int(m.group(1), 16), fn, m.group(2)


def classify(obj, hot):
    """Executions of each kind among the addresses `hot` of `obj`."""
    k = collections.Counter()
    for addr, _, ins in instructions(obj):
        n = hot.get(addr)
        if n:
            what = kind(ins)
            if what:
                k[what] += n
    return k


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, ops = sys.argv[1], int(sys.argv[2])
    least = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    counts = parse(path)
    total = collections.Counter()
    print(f"  {'per operation':<34}" + "".join(f"{k:>9}" for k in KINDS))
    for ob, cnt in sorted(counts.items(), key=lambda x: x[0] or ""):
        hot = {a: n for a, n in cnt.items() if n >= least}
        if not ob or not hot:
            continue
        k = classify(ob, hot)
        if not k:
            continue
        total += k
        print(f"  {ob.rsplit('/', 1)[-1]:<34}" + "".join(f"{k[x] / ops:>9.1f}" for x in KINDS))
    print(f"  {'all':<34}" + "".join(f"{total[x] / ops:>9.1f}" for x in KINDS))


if __name__ == "__main__":
    main()
