#!/usr/bin/env python3
"""Per UDT connection of a traced ab.sh run: the sender's (server's) last
trace line — bytes sent, late_sends, the controller's `restarts N`, EXP
timeouts — and, for builds that stamp arrivals, how long datagrams waited
in the socket before the driver read them (rx_wait_us / rx_stamped, per
endpoint). Usage: summary.py RUN_DIR (the ab.sh OUT directory)."""
import glob, json, os, re, sys

run = sys.argv[1]
for who in ("new", "old"):
    for side in ("srv", "cli"):
        last = {}
        for f in sorted(glob.glob(os.path.join(run, f"trace-{side}-{who}", "*.jsonl"))):
            for line in open(f):
                try:
                    v = json.loads(line)
                except ValueError:
                    continue
                last[(os.path.basename(f), v["id"])] = v
        if not last:
            continue
        print(f"== {who} {side}: {len(last)} connections")
        for (f, i), v in sorted(last.items(), key=lambda kv: kv[1]["t"]):
            m = re.search(r"restarts (\d+)", v.get("cc", ""))
            wait = ""
            if v.get("rx_stamped"):
                wait = f" rx_wait_mean_us={v['rx_wait_us'] / v['rx_stamped']:.0f} (endpoint)"
            print(f"  t={v['t']:8.1f} id={i} MB_sent={v['bytes_sent'] / 1e6:8.1f} MB_recv={v['bytes_received'] / 1e6:8.1f} "
                  f"late_sends={v.get('late_sends', 0)} restarts={m.group(1) if m else '-'} exp={v['exp_timeouts']}{wait}")
