#!/bin/bash
# ab.sh TREE(256k|4k|mixed) ROUNDS OUT: new and old builds alternately (ABBA
# order), each round one `ferry cp -r` upload of the same flat tree to its own
# `ferry serve`, over the destination the build's previous round left,
# truncated to 0 bytes (as the harness's rows: every rename replaces a
# name). `sync` and 5 s between uploads. Appends "build wall" lines to OUT.
set -u
TREE=$1; ROUNDS=$2; OUT=$3
NEW=${NEW:-/work/wt/s16-up/target/release/ferry}; OLD=${OLD:-/var/tmp/old-s16/ferry}
W=/var/tmp/s16-up/ab-$TREE; mkdir -p $W/root
if [ ! -d $W/src ]; then python3 - "$W/src" "$TREE" <<'PY'
import os,sys
top,tree=sys.argv[1],sys.argv[2]
os.makedirs(top,exist_ok=True)
if tree=="256k": sizes=[262144]*2000
elif tree=="4k": sizes=[4096]*20000
else:
    n=1000; w=[1/k for k in range(1,n+1)]; s=sum(w); sc=1_000_000*n/s
    sizes=[max(1,round(x*sc)) for x in w]
buf=os.urandom(max(sizes))
for i,b in enumerate(sizes):
    with open(f"{top}/f{i:05}","wb") as f: f.write(buf[:b])
PY
fi
one() { # build-name binary
  local PORT=$((20000 + RANDOM % 20000))
  $2 serve $W/root --listen 127.0.0.1:$PORT --anonymous write >/dev/null 2>&1 & local SPID=$!
  sleep 1
  local t0=$(date +%s.%N)
  $2 cp -r -q $W/src/ ftp://anonymous@127.0.0.1:$PORT/$1/ || echo "$1 FAILED" >> $OUT
  local t1=$(date +%s.%N)
  kill $SPID; wait $SPID 2>/dev/null
  echo "$1 $(echo "$t1 - $t0" | bc) load $(cut -d' ' -f1 /proc/loadavg) $(date -u +%H:%M:%S)" >> $OUT
  find $W/root/$1 -type f -exec truncate -s 0 {} +
  sync; sleep 5
}
# A first untimed upload each, so both time uploads over existing names.
one new-warm $NEW >/dev/null; one old-warm $OLD >/dev/null
mv $W/root/new-warm $W/root/new; mv $W/root/old-warm $W/root/old
for r in $(seq $ROUNDS); do
  if [ $((r % 2)) = 1 ]; then one new $NEW; one old $OLD; else one old $OLD; one new $NEW; fi
done
