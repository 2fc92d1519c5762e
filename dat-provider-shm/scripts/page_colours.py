#!/usr/bin/env python3
"""Which L2 sets the ring lines of fresh shm segments fall into (BENCHMARKS.md, "Modes round").

The L2 of this machine's cores (AMD EPYC, family 26) is 1 MiB, 16-way, with 64-byte lines: 1024
sets, indexed by physical address bits 6-15, so a 4 KiB page covers 64 sets of one of 16
"colours" (its frame number mod 16). Maps SEGMENTS fresh memfd segments of the provider's
default geometry (64 slots of 8 KiB per ring), touches every page, reads the frame numbers
from /proc/self/pagemap (root only) and prints, for each segment, the share of the lines a
ping-pong cycles through that fall into L2 sets holding more than 16 of them (which a cyclic
use then misses on every pass): ring layout version 3's (each record's header line and
payload in its own 8 KiB slot, the provider's layout) against the version 4 that was tried
and reverted (a ring's 64 header lines in one 4 KiB page, then payload blocks, a ping-pong
using block 0). The measurement showed the frames do not decide this machine's latency.

Usage: sudo python3 page_colours.py [SEGMENTS]
"""
import collections
import ctypes
import mmap
import os
import struct
import sys

SLOTS, SLOT, PAGE = 64, 8192, 4096
LEN = 8192 + 2 * SLOTS * SLOT
RING = SLOTS * SLOT // PAGE  # pages per ring


def frames():
    fd = os.memfd_create("colours")
    os.ftruncate(fd, LEN)
    m = mmap.mmap(fd, LEN)
    for off in range(0, LEN, PAGE):
        m[off] = 1
    base = ctypes.addressof(ctypes.c_char.from_buffer(m))
    with open("/proc/self/pagemap", "rb") as pm:
        out = []
        for off in range(0, LEN, PAGE):
            pm.seek((base + off) // PAGE * 8)
            out.append(struct.unpack("<Q", pm.read(8))[0] & ((1 << 55) - 1))
    return out, (m, fd)


def overflow(lines):
    """Share of `lines` ((colour, line in page) pairs) in sets holding more than 16 of them."""
    c = collections.Counter(lines)
    return sum(n for n in c.values() if n > 16) / len(lines)


def main():
    keep = []  # segments stay mapped: each next one gets other frames, as another connection
    for seg in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
        f, held = frames()
        keep.append(held)
        if not any(f):
            sys.exit("no frame numbers: run as root")
        col = lambda page: f[2 + page] % 16  # noqa: E731 (the slots start at 8192)
        rings = [(r * RING) for r in (0, 1)]
        v3_hdr = [(col(r + 2 * j), 0) for r in rings for j in range(SLOTS)]
        v3_pay = [(col(r + 2 * j), k) for r in rings for j in range(SLOTS) for k in range(1, 64)]
        v3_pay += [(col(r + 2 * j + 1), 0) for r in rings for j in range(SLOTS)]
        v4_hdr = [(col(r), j) for r in rings for j in range(64)]
        v4_pay = [(col(r + 1), k) for r in rings for k in range(64)]
        pairs = sum(1 for a, b in zip(f, f[1:]) if b == a + 1)
        print(
            f"segment {seg}: {pairs}/{len(f) - 1} consecutive frames, "
            f"v3 header-line colours {len(set(c for c, _ in v3_hdr))}/16; lines in overfull sets: "
            f"v3 8 B {overflow(v3_hdr):.2f}, 4 KiB {overflow(v3_hdr + v3_pay):.2f}; "
            f"v4 8 B {overflow(v4_hdr):.2f}, 4 KiB {overflow(v4_hdr + v4_pay):.2f}"
        )


main()
