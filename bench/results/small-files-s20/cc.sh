#!/bin/bash
# cc.sh FERRY "ccs" ROUNDS: tree upload walls at several --concurrency values, rotated
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.
set -u
F=$1; CCS=$2; N=$3
W=${WORK:-/var/tmp/lead/s19}/pairs-256k
R=${SCRATCH:-/var/tmp}/ccroot.$$; mkdir -p $R
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$F serve $R --listen 127.0.0.1:$PORT --anonymous write >/dev/null 2>&1 & SPID=$!
sleep 1
cpu() { awk '{printf "%.2f", ($14+$15)/100}' /proc/$1/stat; }
for i in $(seq 1 $N); do
  line="round $i:"
  for c in $CCS; do
    sleep 1.5; sync
    c0=$(cpu $SPID); t0=$(date +%s.%N)
    if [ $c = one ]; then $F cp --no-resume -q -r $W/one/ ftp://127.0.0.1:$PORT/o$i/ >/dev/null 2>&1
    elif [ $c = auto ]; then $F cp --no-resume -q -r $W/src/ ftp://127.0.0.1:$PORT/a$i/ >/dev/null 2>&1
    else $F cp --no-resume -q -r --concurrency $c $W/src/ ftp://127.0.0.1:$PORT/c$c-$i/ >/dev/null 2>&1; fi
    t1=$(date +%s.%N); c1=$(cpu $SPID)
    line="$line cc$c $(printf %.3f $(echo "$t1-$t0"|bc)) ($(echo "$c1-$c0"|bc))"
    find $R -type f -exec truncate -s 0 {} + 
  done
  echo "$line"
done
kill $SPID; wait $SPID 2>/dev/null
rm -rf $R
