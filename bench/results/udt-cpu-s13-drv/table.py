#!/usr/bin/env python3
"""Markdown table of CPU s/GB by function class from classify.py outputs.

    table.py NAME=FILE.classes [NAME=FILE.classes ...]
"""
import re, sys

GROUPS = [
    ("sendmsg (on loopback: and the receiver's kernel path, run inline)", lambda c: c.startswith("sys sendmsg")),
    ("recvmmsg", lambda c: c.startswith("sys recvmmsg")),
    ("ppoll (sleeps, wake-ups)", lambda c: c.startswith("sys ppoll")),
    ("futex (condvar, mutex)", lambda c: c.startswith("sys futex")),
    ("eventfd kicks (write, read)", lambda c: c.startswith("sys ksys_write") or c.startswith("sys ksys_read") or "eventfd" in c),
    ("pread of the tmpfs source", lambda c: c.startswith("sys pread")),
    ("user memcpy", lambda c: c == "user memcpy"),
    ("memory: page faults, mprotect, madvise, munmap, mremap", lambda c: "page fault" in c or re.match(r"sys (mprotect|madvise|munmap|mremap|mmap|brk)", c)),
    ("malloc/free", lambda c: c == "malloc/free"),
    ("ferry_udt (protocol core)", lambda c: c.startswith("ferry_udt")),
    ("ferry_io::udt (driver)", lambda c: c.startswith("ferry_io::udt")),
    ("other user code", lambda c: c.startswith("user") or c.startswith("ferry_io/proto")),
    ("other kernel (return to user, interrupts, ...)", lambda c: True),
]

runs = []
for arg in sys.argv[1:]:
    name, path = arg.split("=", 1)
    vals = {}
    total = 0.0
    for line in open(path):
        if line.startswith("-- threads"):
            break
        m = re.match(r"(.+?)\s+(\d+)\s+[\d.]+%\s+([\d.]+)$", line.rstrip())
        if not m:
            continue
        cls, secs = m.group(1).strip(), float(m.group(3))
        if cls == "TOTAL":
            total = secs
            continue
        for g, f in GROUPS:
            if f(cls):
                vals[g] = vals.get(g, 0.0) + secs
                break
    runs.append((name, vals, total))

print("| class | " + " | ".join(n for n, _, _ in runs) + " |")
print("|---|" + "---:|" * len(runs))
for g, _ in GROUPS:
    print(f"| {g} | " + " | ".join(f"{v.get(g, 0.0):.3f}" for _, v, _ in runs) + " |")
print("| **total** | " + " | ".join(f"**{t:.3f}**" for _, _, t in runs) + " |")
