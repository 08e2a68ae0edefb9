#!/bin/bash
# Session 16 (from session 15's prof.sh): one upload of a flat tree, loopback,
# as the harness's rows, on ext4 under W (default /var/tmp/s16-up/prof).
# Usage: prof.sh FERRY TREE(256k|mixed|4k) MODE(time|strace|perf) OUT
# The server logs JSON to OUT.log; the line's durability passes ("batch
# durable", their ms) are summed into OUT.txt. CONF=FILE: a server config
# file (e.g. batch_sync = "fsyncs").
set -u
F=$1; TREE=$2; MODE=$3; OUT=$4
W=${W:-/var/tmp/s16-up/prof}/$$; mkdir -p $W/root $W/local
python3 - "$W/local/src" "$TREE" <<'PY'
import os,sys
top,tree=sys.argv[1],sys.argv[2]
os.makedirs(top,exist_ok=True)
if tree=="256k": sizes=[262144]*2000
elif tree=="4k": sizes=[4096]*20000
else:  # the harness's mixed tree: Zipf by rank, exponent 1, mean 1 MB, 1000 files
    n=1000; w=[1/k for k in range(1,n+1)]; s=sum(w); sc=1_000_000*n/s
    sizes=[max(1,round(x*sc)) for x in w]
buf=os.urandom(max(sizes))
for i,b in enumerate(sizes):
    with open(f"{top}/f{i:05}","wb") as f: f.write(buf[:b])
PY
sync
PORT=$((20000 + RANDOM % 20000))
SERVE="$F serve $W/root --listen 127.0.0.1:$PORT --anonymous write --log-format json ${CONF:+--config $CONF}"
case $MODE in
  strace) strace -c -f -o $OUT.strace-server $SERVE >$OUT.log 2>&1 & ;;
  *) $SERVE >$OUT.log 2>&1 & ;;
esac
SPID=$!
sleep 1.5
SP=$(pgrep -P $SPID -x ferry || echo $SPID)
if [ "$MODE" = perf ]; then perf record -e cpu-clock -g -p $SP -o $OUT.perf-server.data >/dev/null 2>&1 & PPID2=$!; sleep 0.5; fi
s0=$(awk '{print $14+$15}' /proc/$SP/stat)
SRC=$W/local/src/; DST=ftp://anonymous@127.0.0.1:$PORT/up/
echo "load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)" >> $OUT.txt
case $MODE in
  strace) /usr/bin/time -f "client wall %e user %U sys %S" strace -c -f -o $OUT.strace-client $F cp -r -q --json $SRC $DST 2>>$OUT.txt >$OUT.json ;;
  perf) /usr/bin/time -f "client wall %e user %U sys %S" perf record -e cpu-clock -g -o $OUT.perf-client.data $F cp -r -q --json $SRC $DST 2>>$OUT.txt >$OUT.json ;;
  *) /usr/bin/time -f "client wall %e user %U sys %S" $F cp -r -q --json $SRC $DST 2>>$OUT.txt >$OUT.json ;;
esac
s1=$(awk '{print $14+$15}' /proc/$SP/stat)
echo "server cpu ticks $((s1-s0)) (1/100 s)  files $(find $W/root/up -type f 2>/dev/null | wc -l)" >> $OUT.txt
if [ "$MODE" = perf ]; then kill -INT $PPID2; wait $PPID2 2>/dev/null; fi
kill $SP $SPID 2>/dev/null; wait $SPID 2>/dev/null
python3 - $OUT.log >> $OUT.txt <<'PY'
import json,sys
ms=[];n=0
for l in open(sys.argv[1]):
    try: v=json.loads(l)
    except: continue
    f=v.get("fields",v)
    if f.get("message")=="batch durable": ms.append(float(f.get("ms",0))); n+=int(f.get("files",0))
print(f"passes {len(ms)} files {n} pass ms total {sum(ms):.0f} max {max(ms) if ms else 0:.0f}: {' '.join(f'{x:.0f}' for x in ms)}")
PY
rm -rf $W
