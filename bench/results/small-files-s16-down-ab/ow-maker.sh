#!/bin/bash
# Re-copy over an existing 20,000 x 4 KiB tree with one build (F), the tree made either by
# F itself (files linked in from O_TMPFILE) or by coreutils cp (ordinary creates): is
# replacing linked-in files slower? Usage: ow-maker.sh F DATA TREE ROUNDS
F=$1; DATA=$2; TREE=$3; R=$4; W=/var/tmp/s16-down/owm; mkdir -p $W
PORT=$((20000 + RANDOM % 20000))
$F serve $DATA --listen 127.0.0.1:$PORT --anonymous read >/dev/null 2>&1 & SPID=$!; sleep 1
for r in $(seq 1 $R); do
  order="ferry cp"; [ $((r % 2)) = 0 ] && order="cp ferry"
  for m in $order; do
    D=$W/ow-$m-$r; rm -rf $D
    if [ $m = ferry ]; then $F cp -r -q --no-resume ftp://anonymous@127.0.0.1:$PORT/$TREE/ $D/ >/dev/null; else cp -r $DATA/$TREE $D; fi
    find $D -type f -exec truncate -s 0 {} +; sync
    /usr/bin/time -f "made-by-$m $r over existing: wall %e user %U sys %S load $(cut -d' ' -f1 /proc/loadavg)" $F cp -r -q --no-resume ftp://anonymous@127.0.0.1:$PORT/$TREE/ $D/ >/dev/null
    mkdir -p $W/trash; mv $D $W/trash/ow-$m-$r-$$
  done
done
kill $SPID; rm -rf $W/trash
