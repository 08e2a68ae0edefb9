#!/bin/bash
# Session 15: a copy over an existing tree (every name there, truncated to 0 so that it is copied again): the second of two
# `ferry cp -r --no-resume` into the same destination is timed; order alternates per round.
# Usage: [MAKER=ferry that makes the destination; default: the build timed] ab-overwrite.sh NEW OLD DATA TREE ROUNDS
NEW=$1; OLD=$2; DATA=$3; TREE=$4; R=$5; W=/var/tmp/s16-down/ow
for r in $(seq 1 $R); do
  order="new old"; [ $((r % 2)) = 0 ] && order="old new"
  for v in $order; do
    F=$NEW; [ $v = old ] && F=$OLD
    PORT=$((20000 + RANDOM % 20000))
    $F serve $DATA --listen 127.0.0.1:$PORT --anonymous read >/dev/null 2>&1 & SPID=$!
    sleep 1; D=$W/ow-$v-$r; rm -rf $D
    ${MAKER:-$F} cp -r -q --no-resume ftp://anonymous@127.0.0.1:$PORT/$TREE/ $D/ >/dev/null
    find $D -type f -exec truncate -s 0 {} +; sync
    /usr/bin/time -f "$v $r over existing: wall %e user %U sys %S load $(cut -d' ' -f1 /proc/loadavg)" $F cp -r -q --no-resume ftp://anonymous@127.0.0.1:$PORT/$TREE/ $D/ >/dev/null
    ls -a $D | grep -c ferry-part | sed "s/^/$v $r partials left: /"
    kill $SPID; wait $SPID 2>/dev/null
    mkdir -p $W/trash; mv $D $W/trash/ow-$v-$r-$$
  done
done
rm -rf $W/trash
