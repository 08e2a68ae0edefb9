#!/usr/bin/env python3
"""Samples vda's written sectors and in-flight count every 20 ms while a
command runs; prints a 100-ms histogram of MB written and the busy share.
usage: disk.py CMD..."""
import subprocess, sys, time
def snap():
    for l in open('/proc/diskstats'):
        f = l.split()
        if f[2] == 'vda': return int(f[9]), int(f[12]), int(f[7]), int(f[10]), int(f[18]), int(f[19])  # sectors written, ms doing io, writes, write ms, flushes, flush ms
t0 = time.time(); s = [(0.0,) + snap()]
p = subprocess.Popen(sys.argv[1:])
while p.poll() is None:
    time.sleep(0.02); s.append((time.time() - t0,) + snap())
end = time.time() - t0
for _ in range(100):  # writeback after the command
    time.sleep(0.02); s.append((time.time() - t0,) + snap())
b0 = 0; out = []
i = 0
while i < len(s):
    j = i
    while j < len(s) and s[j][0] < s[i][0] + 0.1: j += 1
    if j >= len(s): break
    mb = (s[j][1] - s[i][1]) * 512 / 1e6; busy = (s[j][2] - s[i][2]) / ((s[j][0] - s[i][0]) * 1000)
    out.append(f"{s[i][0]:5.2f} {mb:6.1f} MB {busy*100:4.0f}% {'#'*int(mb/5)}")
    i = j
d=[s[-1][k]-s[0][k] for k in range(1,7)]
print(f"command ended at {end:.2f} s; total written {d[0]*512/1e6:.0f} MB; busy {d[1]} ms; writes {d[2]} ({d[3]} ms); flushes {d[4]} ({d[5]} ms)")
print("\n".join(out))
