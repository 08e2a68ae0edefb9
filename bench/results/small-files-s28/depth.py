#!/usr/bin/env python3
"""Samples vda every 10 ms while CMD runs (and 2 s after): per 100-ms bin,
MB written, requests in flight (mean of the samples) and flushes completed.
usage: depth.py CMD..."""
import subprocess, sys, time
def snap():
    for l in open('/proc/diskstats'):
        f = l.split()
        if f[2] == 'vda': return int(f[9]), int(f[11]), int(f[18])  # sectors written, in flight, flushes
t0 = time.time(); s = [(0.0,) + snap()]
p = subprocess.Popen(sys.argv[1:])
while p.poll() is None:
    time.sleep(0.01); s.append((time.time() - t0,) + snap())
end = time.time() - t0
for _ in range(60):
    time.sleep(0.01); s.append((time.time() - t0,) + snap())
print(f"command ended at {end:.2f} s; written {(s[-1][1]-s[0][1])*512/1e6:.0f} MB; flushes {s[-1][3]-s[0][3]}")
i = 0
while i < len(s):
    j = i
    while j < len(s) and s[j][0] < s[i][0] + 0.1: j += 1
    if j >= len(s): break
    mb = (s[j][1] - s[i][1]) * 512 / 1e6; q = sum(x[2] for x in s[i:j]) / (j - i); fl = s[j][3] - s[i][3]
    print(f"{s[i][0]:5.2f} {mb:6.1f} MB  in flight {q:5.1f}  flushes {fl}  {'#' * int(mb / 5)}")
    i = j
