#!/usr/bin/env python3
"""Plots the lines scripts/quic-loopback.sh prints as an SVG: throughput
and CPU seconds per GB (client and server) per row.

    python3 scripts/quic-results-svg.py OUTPUT.txt PLOT.svg TITLE
"""
import re
import sys

rows = []
for line in open(sys.argv[1]):
    if not line.startswith("row="):
        continue
    f = dict(kv.split("=", 1) for kv in line.split())
    rows.append(
        (
            f"{f['row']} -p {f['p']}",
            float(f["Gbit/s"]),
            float(f["client_cpu_s_per_GB"]),
            float(f["server_cpu_s_per_GB"]),
        )
    )

W, ROW, LEFT, PANEL = 900, 26, 110, 360
H = 70 + ROW * len(rows)
out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">']
out.append(f'<text x="10" y="20" font-size="14">{sys.argv[3]}</text>')


def panel(x0, title, values, scale, colors, fmt):
    out.append(f'<text x="{x0}" y="45">{title}</text>')
    for i, vs in enumerate(values):
        y = 55 + i * ROW
        x = x0
        for v, c in zip(vs, colors):
            w = v * scale
            out.append(f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW - 8}" fill="{c}"/>')
            x += w
        out.append(f'<text x="{x + 4:.1f}" y="{y + 13}">{fmt(vs)}</text>')


for i, (name, *_rest) in enumerate(rows):
    out.append(f'<text x="10" y="{55 + i * ROW + 13}">{name}</text>')
gmax = max(r[1] for r in rows) or 1
cmax = max(r[2] + r[3] for r in rows) or 1
panel(LEFT, "Gbit/s", [(r[1],) for r in rows], (PANEL - 60) / gmax, ["#4a7ab5"], lambda v: f"{v[0]:.2f}")
panel(
    LEFT + PANEL + 20,
    "CPU s per GB: client (dark) + server (light)",
    [(r[2], r[3]) for r in rows],
    (PANEL - 60) / cmax,
    ["#b5584a", "#e0a89f"],
    lambda v: f"{v[0]:.2f} + {v[1]:.2f}",
)
out.append("</svg>")
open(sys.argv[2], "w").write("\n".join(out) + "\n")
