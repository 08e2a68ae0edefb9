#!/usr/bin/env python3
"""plot.py: pairs-256k.txt and pairs-mixed.txt (pairs.py output) as one SVG of each row's wall per
round (rows: ferry = new main, old = main before, globus -cc 8, one = the same bytes as one file)."""
import re, sys, os
here = os.path.dirname(os.path.abspath(__file__))
rows = ["ferry", "old", "globus", "one"]
colour = {"ferry": "#1f77b4", "old": "#ff7f0e", "globus": "#2ca02c", "one": "#7f7f7f"}
label = {"ferry": "Ferry (buffered streamed files)", "old": "Ferry before (O_DIRECT)", "globus": "globus-url-copy -r -cd -pp -cc 8", "one": "Ferry, same bytes as one file"}
panels = []
for tree in ["256k", "mixed"]:
    walls = {r: [] for r in rows}
    for line in open(os.path.join(here, f"pairs-{tree}.txt")):
        if line.startswith("round"):
            for r in rows:
                m = re.search(rf"\b{r} ([0-9.]+)s", line)
                walls[r].append(float(m.group(1)))
    panels.append((tree, walls))
W, H, pad, ph = 760, 560, 60, 200
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<rect width="{W}" height="{H}" fill="white"/>']
for p, (tree, walls) in enumerate(panels):
    top = 30 + p * (ph + 70)
    n = len(walls["ferry"]); ymax = max(max(v) for v in walls.values()) * 1.1
    out.append(f'<text x="{pad}" y="{top - 8}" font-weight="bold">Loopback upload, {"2000 × 256 KiB" if tree == "256k" else "mixed tree (1000 Zipf sizes, 956 MB)"}: wall per round (s)</text>')
    out.append(f'<line x1="{pad}" y1="{top + ph}" x2="{W - 20}" y2="{top + ph}" stroke="black"/>')
    out.append(f'<line x1="{pad}" y1="{top}" x2="{pad}" y2="{top + ph}" stroke="black"/>')
    for t in range(0, int(ymax) + 1):
        y = top + ph - t / ymax * ph
        out.append(f'<text x="{pad - 8}" y="{y + 4}" text-anchor="end">{t}</text><line x1="{pad}" y1="{y}" x2="{W - 20}" y2="{y}" stroke="#ddd"/>')
    gw = (W - 20 - pad) / n; bw = gw / (len(rows) + 1)
    for i in range(n):
        for k, r in enumerate(rows):
            v = walls[r][i]; h = v / ymax * ph; x = pad + i * gw + (k + 0.5) * bw
            out.append(f'<rect x="{x:.1f}" y="{top + ph - h:.1f}" width="{bw:.1f}" height="{h:.1f}" fill="{colour[r]}"><title>{r} {v:.3f} s</title></rect>')
        out.append(f'<text x="{pad + (i + 0.5) * gw:.1f}" y="{top + ph + 14}" text-anchor="middle">round {i}</text>')
for k, r in enumerate(rows):
    y = H - 40 + (k // 2) * 16; x = pad + (k % 2) * 340
    out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{colour[r]}"/><text x="{x + 18}" y="{y}">{label[r]}</text>')
out.append("</svg>")
open(os.path.join(here, "pairs.svg"), "w").write("\n".join(out))
