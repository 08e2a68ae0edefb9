#!/bin/bash
# Usage: prof.sh FERRY TREE(4k|256k) DIR(up|down) MODE(time|strace|perf) OUT
# Loopback, server root and client tree in /dev/shm (no ext4 scan).
set -u
F=$1; TREE=$2; DIR=$3; MODE=$4; OUT=$5
W=${W:-/dev/shm/s8-small-prof}; rm -rf $W; mkdir -p $W/root $W/local
case $TREE in 4k) N=5000; BS=4096;; 256k) N=500; BS=262144;; esac
python3 - "$W" "$N" "$BS" <<'PY'
import os,sys
w,n,bs=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])
for top in ("root/src","local/src"):
    for i in range(n):
        d=f"{w}/{top}/d{i//500}"; os.makedirs(d,exist_ok=True)
        with open(f"{d}/f{i:05}","wb") as f: f.write(os.urandom(bs))
PY
PORT=$((20000 + RANDOM % 20000))
case $MODE in
  strace) strace -c -f -o $OUT.strace-server $F serve $W/root --listen 127.0.0.1:$PORT --anonymous write >/dev/null 2>&1 & ;;
  *) $F serve $W/root --listen 127.0.0.1:$PORT --anonymous write >/dev/null 2>&1 & ;;
esac
SPID=$!
sleep 1.5
SP=$(pgrep -P $SPID -x ferry || echo $SPID)
if [ "$MODE" = perf ]; then perf record -e cpu-clock -g -p $SP -o $OUT.perf.data >/dev/null 2>&1 & PPID2=$!; sleep 0.5; fi
s0=$(awk '{print $14+$15}' /proc/$SP/stat)
if [ $DIR = up ]; then SRC=$W/local/src/; DST=ftp://anonymous@127.0.0.1:$PORT/up/; else SRC=ftp://anonymous@127.0.0.1:$PORT/src/; DST=$W/local/down/; fi
if [ "$MODE" = strace ]; then
  /usr/bin/time -f "client wall %e user %U sys %S" strace -c -f -o $OUT.strace-client $F cp -r -q $SRC $DST 2>>$OUT.txt
else
  /usr/bin/time -f "client wall %e user %U sys %S" $F cp -r -q $SRC $DST 2>>$OUT.txt
fi
s1=$(awk '{print $14+$15}' /proc/$SP/stat)
echo "server cpu ticks $((s1-s0)) (1/100 s)  files $(find $W/root/up $W/local/down -type f 2>/dev/null | wc -l)" >> $OUT.txt
if [ "$MODE" = perf ]; then kill -INT $PPID2; wait $PPID2 2>/dev/null; fi
kill $SP $SPID 2>/dev/null; wait $SPID 2>/dev/null
rm -rf $W
