#!/usr/bin/env bash
# Server profile of the mixed tree's upload against the same bytes as one file, loopback.
# Sources: the trees pairs.py makes under /var/tmp/lead/s19/pairs-mixed (set SRC/ONE/F for others).
# Passes: grep "batch durable" OUT/serve.log (ms= each); CPU: perf report -i OUT/tree.perf / one.perf.
set -euo pipefail
F=${F:-/var/tmp/lead/s26/bin/ferry}
SRC=${SRC:-/var/tmp/lead/s19/pairs-mixed/src}; ONE=${ONE:-/var/tmp/lead/s19/pairs-mixed/one}
O=/var/tmp/lead/s26/prof/$(date +%H%M%S); mkdir -p $O/root
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
FERRY_LOG=info $F serve $O/root --listen 127.0.0.1:$port --anonymous write > /dev/null 2> $O/serve.log &
spid=$!
sleep 1
for what in tree one; do
  if [ $what = tree ]; then s=$SRC/; else s=$ONE/; fi
  # warm the source
  cat $s/* > /dev/null
  perf record -q -e cpu-clock -g -p $spid -o $O/$what.perf 2>/dev/null &
  ppid=$!
  sleep 0.5
  /usr/bin/time -f "$what wall %e s client user %U sys %S" $F cp --json -q -r $s ftp://127.0.0.1:$port/$what-$RANDOM/ > $O/$what.json 2>> $O/times.txt
  kill -INT $ppid; wait $ppid || true
  grep -c 'batch durable' $O/serve.log >> $O/times.txt || true
  sleep 2
done
kill $spid
cat $O/times.txt
echo $O
