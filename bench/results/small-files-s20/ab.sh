#!/bin/bash
# ab.sh FERRY_A "FLAGS_A" FERRY_B "FLAGS_B" ROUNDS [TREE]: tree upload walls, server A vs B, and one file on A, rotated
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.
set -u
FA=$1; GA=$2; FB=$3; GB=$4; N=$5; T=${6:-256k}
W=${WORK:-/var/tmp/lead/s19}/pairs-$T
R=${SCRATCH:-/var/tmp}/abroot.$$; mkdir -p $R/a $R/b
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
PA=$(port); $FA serve $R/a --listen 127.0.0.1:$PA --anonymous write $GA >/dev/null 2>&1 & SA=$!
PB=$(port); $FB serve $R/b --listen 127.0.0.1:$PB --anonymous write $GB >/dev/null 2>&1 & SB=$!
sleep 1
cpu() { awk '{printf "%.2f", ($14+$15)/100}' /proc/$1/stat; }
rows="a b one"
for i in $(seq 1 $N); do
  line="round $i:"
  for row in $rows; do
    sleep 1.5; sync
    case $row in a) F=$FA; P=$PA; S=$SA; src=$W/src/;; b) F=$FB; P=$PB; S=$SB; src=$W/src/;; one) F=$FA; P=$PA; S=$SA; src=$W/one/;; esac
    c0=$(cpu $S); t0=$(date +%s.%N)
    $F cp --no-resume -q -r $src ftp://127.0.0.1:$P/$row$i/ >/dev/null 2>&1 || line="$line FAIL"
    t1=$(date +%s.%N); c1=$(cpu $S)
    line="$line $row $(printf %.3f $(echo "$t1-$t0"|bc)) ($(echo "$c1-$c0"|bc))"
  done
  find $R -type f -exec truncate -s 0 {} +
  rows="${rows#* } ${rows%% *}"
  echo "$line"
done
kill $SA $SB; wait $SA $SB 2>/dev/null
rm -rf $R
