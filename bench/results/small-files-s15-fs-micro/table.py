#!/usr/bin/env python3
"""Files/s per way and writer threads from run.sh / run-fresh.sh output: every rep, and ÷ partial."""
import re, sys, collections
ways = ["partial", "tmpfile", "tmpfile-empty", "hidden", "batched", "inplace"]
for path in sys.argv[1:]:
    got = collections.defaultdict(list)
    for line in open(path):
        m = re.search(r"rep=(\d+) .* (\S+) threads=(\d+) files=(\d+) size=(\d+) .*files_per_s=(\d+)", line)
        if m:
            got[(int(m[5]), int(m[3]), m[2])].append(int(m[6]))
    print(f"\n{path}: files/s per rep (best ÷ partial's best)\n")
    print("| size | threads | " + " | ".join(ways) + " |")
    print("|---|---|" + "---|" * len(ways))
    for size, t in sorted({(s, t) for s, t, _ in got}):
        med = lambda w: max(got[(size, t, w)]) if got[(size, t, w)] else None
        base = med("partial")
        cells = []
        for w in ways:
            v = got[(size, t, w)]
            cells.append(" / ".join(f"{x:,}" for x in v) + (f" ({med(w) / base:.2f})" if base and v else ""))
        print(f"| {size // 1024} KiB | {t} | " + " | ".join(cells) + " |")
