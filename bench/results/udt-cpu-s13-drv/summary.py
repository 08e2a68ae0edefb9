#!/usr/bin/env python3
"""One line per run of run.sh: seconds, Gbit/s, CPU s/GB and events per GB of both ends, UDT counters."""
import json, os, re, sys
out, tag = sys.argv[1], sys.argv[2]
j = json.load(open(f"{out}/{tag}.json"))
gb = j["bytes"] / 1e9
secs = j.get("seconds") or j.get("elapsed_s") or 0
u = j.get("udt") or {}
line = f"{tag}: {secs:.2f} s {j['bytes']*8/secs/1e9 if secs else 0:.2f} Gbit/s"
for side in ("server", "client"):
    p = f"{out}/{tag}.{side}.stat"
    if not os.path.exists(p):
        continue
    t = open(p).read()
    vals = {}
    for m in re.finditer(r"^\s*([\d,.]+)\s+(?:msec\s+)?([\w:-]+)", t, re.M):
        vals[m.group(2)] = float(m.group(1).replace(",", ""))
    cpu = vals.get("cpu-clock", 0) / 1e3 / gb
    parts = [f"{side} {cpu:.2f} CPU-s/GB"]
    for k, v in vals.items():
        if k == "cpu-clock":
            continue
        short = k.replace("syscalls:sys_enter_", "").replace("context-switches", "cs")
        if v:
            parts.append(f"{short} {v/gb/1e3:.1f}k")
    line += " | " + " ".join(parts)
if u:
    line += f" | udt pk_rx {u.get('packets_received')} lost_det {u.get('lost_detected')} naks {u.get('naks_sent')} drop {u.get('dropped')}"
print(line)
