#!/bin/bash
# Same binary, streamed vs per-file BRET (FERRY_NO_STREAM_BATCH), alternating.
DATA=$1; TREE=$2; R=$3; F=${F:-/var/tmp/s14-small-bin/ferry}
PORT=$((20000 + RANDOM % 20000))
$F serve $DATA --listen 127.0.0.1:$PORT --anonymous read >/dev/null 2>&1 & SPID=$!
sleep 1; mkdir -p /var/tmp/s14-small-ab
for r in $(seq 1 $R); do
  for v in stream perfile; do
    D=/var/tmp/s14-small-ab/$v-$r; rm -rf $D; sync
    if [ $v = perfile ]; then export FERRY_NO_STREAM_BATCH=1; else unset FERRY_NO_STREAM_BATCH; fi
    /usr/bin/time -f "$v $r wall %e user %U sys %S" $F cp -r -q --json ftp://anonymous@127.0.0.1:$PORT/$TREE/ $D/ > /var/tmp/s14-small-ab/$v-$r.json
    rm -rf $D
  done
done
kill $SPID
