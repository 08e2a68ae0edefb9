#!/bin/bash
# A/B of one harness tree: serve DATA with each build, ferry cp -r into a fresh dir; alternating.
# Usage: ab-new-vs-old.sh DATA TREE ROUNDS
DATA=$1; TREE=$2; R=$3
for r in $(seq 1 $R); do
  for v in new old; do
    F=/var/tmp/s14-small-bin/ferry; [ $v = old ] && F=/var/tmp/old-s14/ferry
    PORT=$((20000 + RANDOM % 20000))
    $F serve $DATA --listen 127.0.0.1:$PORT --anonymous read >/dev/null 2>&1 & SPID=$!
    sleep 1; D=/var/tmp/s14-small-ab/$v-$r; rm -rf $D; mkdir -p /var/tmp/s14-small-ab
    sync
    /usr/bin/time -f "$v $r wall %e user %U sys %S" $F cp -r -q --json ftp://anonymous@127.0.0.1:$PORT/$TREE/ $D/ >/dev/null
    kill $SPID; wait $SPID 2>/dev/null
    # Moved aside, deleted at the end: a delete slows the next row's creates (docs/trees.md, session 7).
    mkdir -p /var/tmp/s14-small-ab/trash; mv $D /var/tmp/s14-small-ab/trash/$v-$r-$$
  done
done
rm -rf /var/tmp/s14-small-ab/trash
