#!/bin/bash
# cc.sh FERRY ROUNDS "CCS": 256k tree uploads to one server at several --concurrency values, rotated; wall and server CPU
set -u
F=$1; N=$2; CCS=$3
W=${WORK:-/var/tmp/lead/s19}/pairs-256k
R=${SCRATCH:-/var/tmp}/ccroot.$$; mkdir -p $R
P=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$F serve $R --listen 127.0.0.1:$P --anonymous write >/dev/null 2>&1 & S=$!
sleep 1
cpu() { awk '{printf "%.2f", ($14+$15)/100}' /proc/$1/stat; }
rows="$CCS"
for i in $(seq 1 $N); do
  line="round $i:"
  for c in $rows; do
    sleep 1.5; sync
    c0=$(cpu $S); t0=$(date +%s.%N)
    if [ $c = one ]; then $F cp --no-resume -q -r $W/one/ ftp://127.0.0.1:$P/o$i/ >/dev/null 2>&1 || line="$line FAIL"
    elif [ $c = auto ]; then $F cp --no-resume -q -r $W/src/ ftp://127.0.0.1:$P/a$i/ >/dev/null 2>&1 || line="$line FAIL"
    else $F cp --no-resume -q -r --concurrency $c $W/src/ ftp://127.0.0.1:$P/c$c-$i/ >/dev/null 2>&1 || line="$line FAIL"; fi
    t1=$(date +%s.%N); c1=$(cpu $S)
    line="$line cc$c $(printf %.3f $(echo "$t1-$t0"|bc)) ($(echo "$c1-$c0"|bc))"
  done
  find $R -type f -exec truncate -s 0 {} +
  rows="${rows#* } ${rows%% *}"
  echo "$line"
done
kill $S; wait $S 2>/dev/null
rm -rf $R
