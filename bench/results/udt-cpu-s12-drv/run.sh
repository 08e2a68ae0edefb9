#!/usr/bin/env bash
# CPU and context switches of a 2 GiB UDT download on loopback, both ends,
# and (with PERF=1) a cpu-clock call-graph profile of each.
#   run.sh FERRY TAG OUTDIR PORT
# Source: /dev/shm/s12-drv-cpu/f (2 GiB), sink /dev/null.
set -euo pipefail
ferry=$1 tag=$2 out=$3 port=$4
mkdir -p "$out" /dev/shm/s12-drv-cpu
src=/dev/shm/s12-drv-cpu/f
[ -f "$src" ] || head -c $((2 << 30)) /dev/zero > "$src"
"$ferry" serve /dev/shm/s12-drv-cpu --listen 127.0.0.1:$port --anonymous read > "$out/$tag.serve.log" 2>&1 &
spid=$!
sleep 1
if [ "${PERF:-0}" = 1 ]; then
  perf record -q -e cpu-clock -g -p $spid -o "$out/$tag.server.perf.data" 2>/dev/null &
  ppid=$!
  sleep 0.5
  FERRY_PATH_CACHE=off perf record -q -e cpu-clock -g -o "$out/$tag.client.perf.data" -- \
    "$ferry" cp --json --transport udt "ftp://127.0.0.1:$port/f" /dev/null > "$out/$tag.json" 2>/dev/null
  kill -INT $ppid; wait $ppid || true
else
  perf stat -e context-switches,cpu-clock -p $spid -o "$out/$tag.server.stat" &
  ppid=$!
  sleep 0.5
  FERRY_PATH_CACHE=off perf stat -e context-switches,cpu-clock -o "$out/$tag.client.stat" -- \
    "$ferry" cp --json --transport udt "ftp://127.0.0.1:$port/f" /dev/null > "$out/$tag.json" 2>/dev/null
  kill -INT $ppid; wait $ppid || true
fi
kill $spid; wait $spid 2>/dev/null || true
python3 - "$out" "$tag" <<'PY'
import json, re, sys, os
out, tag = sys.argv[1], sys.argv[2]
j = json.load(open(f"{out}/{tag}.json"))
gb = j["bytes"] / 1e9
secs = j.get("seconds") or j.get("elapsed_s") or 0
line = f"{tag}: {j['bytes']} B in {secs:.2f} s" if secs else f"{tag}: {j['bytes']} B"
for side in ("client", "server"):
    p = f"{out}/{tag}.{side}.stat"
    if os.path.exists(p):
        t = open(p).read()
        cs = float(re.search(r"([\d,]+)\s+context-switches", t).group(1).replace(",", ""))
        ms = float(re.search(r"([\d,.]+)\s+msec cpu-clock", t).group(1).replace(",", ""))
        line += f" | {side}: {ms/1e3/gb:.2f} CPU s/GB, {cs/gb:.0f} context switches/GB"
print(line)
PY
