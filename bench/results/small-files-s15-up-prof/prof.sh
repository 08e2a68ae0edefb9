#!/bin/bash
# Session 14 (copied for session 15, paths under /var/tmp/s15-up-prof): FLAT=1 makes one flat directory (as the harness's trees), PREFILL=1 see below.
# Usage: prof.sh FERRY TREE(4k|256k) DIR(up|down) MODE(time|strace|perf) OUT
# Full scale (20,000 x 4 KiB, 2,000 x 256 KiB), loopback, on ext4 under W
# (default /var/tmp/s15-up-prof) as the harness's rows; strace/perf on both ends.
set -u
F=$1; TREE=$2; DIR=$3; MODE=$4; OUT=$5
W=${W:-/var/tmp/s15-up-prof}/$$; mkdir -p $W/root $W/local
case $TREE in 4k) N=20000; BS=4096;; 256k) N=2000; BS=262144;; esac
if [ $DIR = up ]; then TOP=local/src; else TOP=root/src; fi
python3 - "$W/$TOP" "$N" "$BS" <<'PY'
import os,sys
top,n,bs=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])
for i in range(n):
    d=f"{top}" if os.environ.get("FLAT") else f"{top}/d{i//500}"; os.makedirs(d,exist_ok=True)
    with open(f"{d}/f{i:05}","wb") as f: f.write(os.urandom(bs))
PY
# PREFILL=1: the destination holds every name, truncated to 0 bytes
# (each file's rename then replaces one).
if [ -n "${PREFILL:-}" ] && [ $DIR = down ]; then cp -r $W/root/src $W/local/down && find $W/local/down -type f -exec truncate -s 0 {} +; fi
sync
PORT=$((20000 + RANDOM % 20000))
case $MODE in
  strace) strace -c -f -o $OUT.strace-server $F serve $W/root --listen 127.0.0.1:$PORT --anonymous write >/dev/null 2>&1 & ;;
  *) $F serve $W/root --listen 127.0.0.1:$PORT --anonymous write >/dev/null 2>&1 & ;;
esac
SPID=$!
sleep 1.5
SP=$(pgrep -P $SPID -x ferry || echo $SPID)
if [ "$MODE" = perf ]; then perf record -e cpu-clock -g -p $SP -o $OUT.perf-server.data >/dev/null 2>&1 & PPID2=$!; sleep 0.5; fi
s0=$(awk '{print $14+$15}' /proc/$SP/stat)
if [ $DIR = up ]; then SRC=$W/local/src/; DST=ftp://anonymous@127.0.0.1:$PORT/up/; else SRC=ftp://anonymous@127.0.0.1:$PORT/src/; DST=$W/local/down/; fi
echo "load $(cut -d' ' -f1-3 /proc/loadavg)" >> $OUT.txt
case $MODE in
  strace) /usr/bin/time -f "client wall %e user %U sys %S" strace -c -f -o $OUT.strace-client $F cp -r -q --json $SRC $DST 2>>$OUT.txt >$OUT.json ;;
  perf) /usr/bin/time -f "client wall %e user %U sys %S" perf record -e cpu-clock -g -o $OUT.perf-client.data $F cp -r -q --json $SRC $DST 2>>$OUT.txt >$OUT.json ;;
  *) /usr/bin/time -f "client wall %e user %U sys %S" $F cp -r -q --json $SRC $DST 2>>$OUT.txt >$OUT.json ;;
esac
s1=$(awk '{print $14+$15}' /proc/$SP/stat)
echo "server cpu ticks $((s1-s0)) (1/100 s)  files $(find $W/root/up $W/local/down -type f 2>/dev/null | wc -l)" >> $OUT.txt
if [ "$MODE" = perf ]; then kill -INT $PPID2; wait $PPID2 2>/dev/null; fi
kill $SP $SPID 2>/dev/null; wait $SPID 2>/dev/null
mv $W /var/tmp/s15-up-prof/trash-$$
