#!/bin/bash
# Paired uploads, new and old alternated (ABBA), each into a fresh directory of
# its own server's root; nothing deleted until the end (ext4's recently
# deleted inodes, docs/trees.md session 17). Usage: ab.sh TREE(256k|mixed) ROUNDS OUT
set -u
TREE=$1; R=$2; OUT=$3
NEW=/work/wt/s17-up/target/release/ferry; OLD=/var/tmp/old-s17/ferry
W=/var/tmp/s17-up/ab/$TREE; mkdir -p $W/src $W/roots
[ -f $W/src/.made ] || python3 - "$W/src" "$TREE" <<'PY'
import os,sys
top,tree=sys.argv[1],sys.argv[2]
if tree=="256k": sizes=[262144]*2000
else:
    n=1000; w=[1/k for k in range(1,n+1)]; s=sum(w); sc=1_000_000*n/s
    sizes=[max(1,round(x*sc)) for x in w]
buf=os.urandom(max(sizes))
for i,b in enumerate(sizes):
    with open(f"{top}/f{i:05}","wb") as f: f.write(buf[:b])
open(f"{top}/.made","w").close()
PY
sync
one() { # label binary round
  local L=$1 F=$2 r=$3; local root=$W/roots/$L-$r; mkdir -p $root
  local PORT=$((20000 + RANDOM % 20000))
  $F serve $root --listen 127.0.0.1:$PORT --anonymous write >/dev/null 2>&1 & local SPID=$!
  sleep 0.7
  sync
  local s0=$(awk '{print $14+$15}' /proc/$SPID/stat)
  local t0=$(date +%s.%N)
  $F cp -r -q $W/src/ ftp://anonymous@127.0.0.1:$PORT/up/ >/dev/null 2>&1; local rc=$?
  local t1=$(date +%s.%N)
  local s1=$(awk '{print $14+$15}' /proc/$SPID/stat)
  kill $SPID; wait $SPID 2>/dev/null
  printf "%s round %d rc %d wall %.3f s server cpu %.2f s load %s\n" $L $r $rc $(echo "$t1-$t0"|bc) $(echo "($s1-$s0)/100"|bc -l) "$(cut -d' ' -f1 /proc/loadavg)" >> $OUT
}
for r in $(seq 1 $R); do
  if [ $((r%2)) = 1 ]; then one new $NEW $r; one old $OLD $r; else one old $OLD $r; one new $NEW $r; fi
done
