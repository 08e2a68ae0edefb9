#!/usr/bin/env bash
# Bounded stall reproduction: 6 busy loops (<=170 s, killed by PID) + udt loopback copies, traced both ends.
B=${1:-/var/tmp/old-s9/ferry}; TAG=${2:-old}
R=/var/tmp/s9-udt-repro/$TAG; mkdir -p $R/trace-srv $R/trace-cli
D=/dev/shm/s9-udt-lo; mkdir -p $D
[ -f $D/f.bin ] || head -c $((1<<30)) /dev/urandom > $D/f.bin
FERRY_UDT_TRACE=$R/trace-srv $B serve $D --listen 127.0.0.1:0 --anonymous read > $R/server.log 2>&1 &
SP=$!
sleep 1
PORT=$(grep -oE "127\.0\.0\.1:[0-9]+" $R/server.log | head -1 | cut -d: -f2)
PIDS=""
for i in 1 2 3 4 5 6; do ( end=$((SECONDS+170)); while [ $SECONDS -lt $end ]; do :; done ) & PIDS="$PIDS $!"; done
end=$((SECONDS+160))
n=0
while [ $SECONDS -lt $end ]; do
  for p in 1 4; do
    n=$((n+1)); s=$(date +%s.%N)
    FERRY_UDT_TRACE=$R/trace-cli timeout 40 $B cp --json --no-resume --mode extended -p $p --transport udt ftp://127.0.0.1:$PORT/f.bin /dev/null > $R/cp-$n.json 2>$R/cp-$n.err; rc=$?
    e=$(date +%s.%N)
    echo "$n -p $p rc=$rc $(echo "scale=1; ($e - $s)/1" | bc) s load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
kill $PIDS 2>/dev/null
sleep 2; kill $SP
