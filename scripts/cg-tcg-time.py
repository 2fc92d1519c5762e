#!/usr/bin/env python3
"""Weighs a callgrind profile's instructions by what each kind costs under TCG, and prints the
estimated time per operation of each object and of the costliest functions.

    scripts/cg-tcg-time.py FILE.callgrind OPS [MIN]

FILE must come from `valgrind --tool=callgrind --dump-instr=yes` (`scripts/rxe-callgrind.sh`
with `RXE_CG_OPTS=--dump-instr=yes`); figures are per OPS, counting instructions executed at
least MIN times (default 1000, so that most set-up drops out; not the dynamic linker's
symbol look-ups at start-up, which run in loops: ld-linux's row is set-up); the objects are
disassembled with objdump on this machine (see scripts/cg-kinds.py, whose parser this uses).

Why: under TCG (the Soft-RoCE VM on this machine) an instruction's cost depends on its kind
far more than on hardware: a register add about 0.2 ns, an 8-byte load 1.1 ns, a store 0.7,
a 16-byte SSE move (struct copies, zeroing) 3.7, a locked read-modify-write 7.1, a call and
its return 6.8, an indirect call and its return 18 (scripts/tcg-costs.sh, session 17). The
costs below are those figures; the estimate leaves out what the kinds do not capture (the
translation cache's misses, the host's data caches), so compare builds, not absolute times.
"""

import collections
import importlib.util
import os
import re
import sys

# Nanoseconds per execution in the Soft-RoCE guest (scripts/tcg-costs.sh, session 17); a call
# or indirect call carries the push of its return address, `ret` the pop.
COST = {
    "alu": 0.23,
    "load": 1.08,
    "store": 0.71,
    "rmw": 1.08 + 0.71,
    "sse16": 3.68,
    "atomic": 7.13,
    "call": 3.4,
    "ret": 3.4,
    "icall": 14.6,
    "ijmp": 14.6,
    "syscall": 0.0,  # the system call's own time is not the path's instructions
}


def kinds_module():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("cg_kinds", os.path.join(here, "cg-kinds.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kind(ins, base):
    """The cost class of instruction `ins`: cg-kinds.py's kinds (`base`, its `kind`), else a
    memory access by direction, else a register operation."""
    k = base(ins)
    if k:
        return k
    ins = re.sub(r"^(bnd|notrack|rep|repz|repnz) ", "", ins)
    op = ins.split()[0] if ins else ""
    if op.startswith("push"):
        return "store"
    if op.startswith("pop"):
        return "load"
    if op.startswith(("lea", "nop", "data16", "j", "endbr")) or "(" not in ins:
        return "alu"
    if "%xmm" in ins and re.match(r"v?mov(ups|aps|dqu|dqa|upd|apd)", op):
        return "sse16"
    dst = ins[len(op):].strip().rsplit(",", 1)[-1]
    if "(" in dst:
        return "store" if op.startswith(("mov", "set")) else "rmw"
    return "load"


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, ops = sys.argv[1], int(sys.argv[2])
    least = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    kinds = kinds_module()
    counts = kinds.parse(path)
    total = 0.0
    funcs = collections.Counter()
    print(f"  {'estimated ns per operation':<30}{'all':>9}" + "".join(f"{k:>8}" for k in COST))
    for ob, cnt in sorted(counts.items(), key=lambda x: x[0] or ""):
        hot = {a: n for a, n in cnt.items() if n >= least}
        if not ob or not hot:
            continue
        by_kind = collections.Counter()
        for addr, fn, ins in kinds.instructions(ob):
            n = hot.get(addr)
            if n:
                k = kind(ins, kinds.kind)
                by_kind[k] += n * COST[k]
                funcs[(ob.rsplit("/", 1)[-1], fn)] += n * COST[k]
        ns = sum(by_kind.values())
        if not ns:
            continue
        total += ns
        print(f"  {ob.rsplit('/', 1)[-1]:<30}{ns / ops:>9.0f}"
              + "".join(f"{by_kind[k] / ops:>8.0f}" for k in COST))
    print(f"  {'all':<30}{total / ops:>9.0f}")
    print("  costliest functions (estimated ns per operation):")
    for (ob, fn), ns in funcs.most_common(12):
        short = re.sub(r"17h[0-9a-f]{16}E$", "", fn)[:90]
        print(f"  {ns / ops:>8.0f}  {ob:<20} {short}")


if __name__ == "__main__":
    main()
