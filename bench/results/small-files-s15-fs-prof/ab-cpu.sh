#!/bin/bash
# Session 15: new vs old build on one flat tree of 20,000 x 4 KiB (ext4, /var/tmp), downloaded
# into a fresh directory; order alternates each round (new-old, old-new); the client's wall,
# user and system time. Usage: ab-cpu.sh NEW OLD DATA TREE ROUNDS
NEW=$1; OLD=$2; DATA=$3; TREE=$4; R=$5; W=/var/tmp/s15-fs-ab
for r in $(seq 1 $R); do
  order="new old"; [ $((r % 2)) = 0 ] && order="old new"
  for v in $order; do
    F=$NEW; [ $v = old ] && F=$OLD
    PORT=$((20000 + RANDOM % 20000))
    $F serve $DATA --listen 127.0.0.1:$PORT --anonymous read >/dev/null 2>&1 & SPID=$!
    sleep 1; D=$W/$v-$r; rm -rf $D
    sync
    /usr/bin/time -f "$v $r wall %e user %U sys %S load $(cut -d' ' -f1 /proc/loadavg)" $F cp -r -q --json ftp://anonymous@127.0.0.1:$PORT/$TREE/ $D/ >/dev/null
    kill $SPID; wait $SPID 2>/dev/null
    # Moved aside, deleted at the end: a delete slows the next row's creates (docs/trees.md, session 7).
    mkdir -p $W/trash; mv $D $W/trash/$v-$r-$$
  done
done
rm -rf $W/trash
