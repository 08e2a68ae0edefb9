#!/bin/bash
# cc.sh FERRY "CCS" ROUNDS: 256 KiB tree uploads to one server at several --concurrency values
# ("auto": none given; "one": the tree's bytes as one file), rotated; wall and server CPU.
# (Session 20's concurrency-fast.txt came from a first version that did not rotate the rows.)
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.
set -u
. "$(dirname "$0")/lib.sh"
F=$1; rows=$2; N=$3
W=${WORK:-/var/tmp/lead/s19}/pairs-256k
R=${SCRATCH:-/var/tmp}/ccroot.$$; mkdir -p $R
serve $F $R
for i in $(seq 1 $N); do
  line="round $i:"
  for c in $rows; do
    case $c in
      one) row cc$c $SPID $F cp --no-resume -q -r $W/one/ ftp://127.0.0.1:$PORT/o$i/;;
      auto) row cc$c $SPID $F cp --no-resume -q -r $W/src/ ftp://127.0.0.1:$PORT/a$i/;;
      *) row cc$c $SPID $F cp --no-resume -q -r --concurrency $c $W/src/ ftp://127.0.0.1:$PORT/c$c-$i/;;
    esac
  done
  find $R -type f -exec truncate -s 0 {} +
  rows=$(rotate "$rows")
  echo "$line"
done
kill $SPID; wait $SPID 2>/dev/null
deleted $R
