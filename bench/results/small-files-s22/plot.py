#!/usr/bin/env python3
"""plot.py: ratios.svg, new ÷ old per round for every run of this directory
(wall as files per second, above 1 = new faster; server CPU as old ÷ new,
above 1 = new cheaper). Reads the ab.sh and pairs.py outputs (in ab-*-swapped
old is row a); std only."""
import re, glob, os, statistics
here = os.path.dirname(os.path.abspath(__file__))
runs = []
for f in sorted(glob.glob(f"{here}/ab-*.txt")) + sorted(glob.glob(f"{here}/pairs-*.txt")):
    wall, cpu = [], []
    for line in open(f):
        if line.startswith("round") and "ab-" in f:
            a = re.search(r"\ba ([\d.]+) \(([\d.]+)\)", line); b = re.search(r"\bb ([\d.]+) \(([\d.]+)\)", line)
            if a and b and not line.startswith("round 1:"):  # round 1 warms the source
                if "swapped" in f:  # old is server a there
                    a, b = b, a
                wall.append(float(b[1]) / float(a[1])); cpu.append(float(b[2]) / float(a[2]))
        elif line.startswith("round") and "pairs-" in f:
            n = re.search(r"ferry ([\d.]+)s \(srv cpu ([\d.]+)\)", line); o = re.search(r"old ([\d.]+)s \(srv cpu ([\d.]+)\)", line)
            if n and o:
                wall.append(float(o[1]) / float(n[1])); cpu.append(float(o[2]) / float(n[2]))
    # Not new against old: two variants of new.
    if wall and "prealloc" not in f and "n1-n2" not in f:
        runs.append((os.path.basename(f)[:-4], wall, cpu))
W, H, L, T = 760, 60 + 40 * len(runs), 190, 30
x = lambda v: L + (v - 0.6) / (1.6 - 0.6) * (W - L - 20)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<text x="{L}" y="16">new ÷ old per round: wall (blue, files/s) and server CPU (orange); medians as bars</text>']
for v in (0.6, 0.8, 1.0, 1.2, 1.4, 1.6):
    out.append(f'<line x1="{x(v):.1f}" y1="{T}" x2="{x(v):.1f}" y2="{H-20}" stroke="{"#000" if v == 1.0 else "#ddd"}"/>')
    out.append(f'<text x="{x(v):.1f}" y="{H-5}" text-anchor="middle">{v:.1f}</text>')
for i, (name, wall, cpu) in enumerate(runs):
    y = T + 20 + 40 * i
    out.append(f'<text x="5" y="{y+4}">{name}</text>')
    for vals, dy, col in ((wall, -7, "#1f77b4"), (cpu, 7, "#ff7f0e")):
        for v in vals:
            out.append(f'<circle cx="{x(min(max(v, 0.6), 1.6)):.1f}" cy="{y+dy}" r="3" fill="{col}" fill-opacity="0.6"/>')
        m = statistics.median(vals)
        out.append(f'<line x1="{x(m):.1f}" y1="{y+dy-6}" x2="{x(m):.1f}" y2="{y+dy+6}" stroke="{col}" stroke-width="3"/>')
        print(f"{name}: {'wall' if dy < 0 else 'cpu '} median {m:.2f} over {len(vals)} rounds")
out.append("</svg>")
open(f"{here}/ratios.svg", "w").write("\n".join(out))
