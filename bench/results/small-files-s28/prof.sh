#!/usr/bin/env bash
# prof.sh FERRY OUT: the mixed tree's loopback upload by Ferry and floor_tree.py (a syncfs
# every 32 files per thread), each under `perf record -e cpu-clock -g -a`; prints each one's
# wall, CPU samples by command and the top kernel and user symbols.
set -u
. "$(dirname "$(readlink -f "$0")")/../small-files-s20/lib.sh"  # port, serve, warm (and waits out recent deletes)
F=$1; OUT=$2; H=$(dirname "$(readlink -f "$0")"); mkdir -p $OUT
SRC=/var/tmp/lead/s19/pairs-mixed/src; R=/var/tmp/lead/s19/pairs-mixed/prof-$RANDOM; mkdir -p $R/srv
serve $F $R/srv
for row in ferry floor; do
  warm $SRC; sync; sleep 1.5
  perf record -q -e cpu-clock -g -a -o $OUT/$row.perf 2>/dev/null & pp=$!; sleep 0.5
  t0=$(date +%s.%N)
  if [ $row = floor ]; then python3 $H/floor_tree.py $R/floor 32; else $F cp -q -r $SRC/ ftp://127.0.0.1:$PORT/t/; fi
  t1=$(date +%s.%N); sleep 0.2; kill -INT $pp; wait $pp
  echo "== $row wall $(echo "$t1 - $t0" | bc) s"
  perf report -i $OUT/$row.perf --no-children --sort comm --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -8
  perf report -i $OUT/$row.perf --no-children --sort sym --stdio -g none 2>/dev/null | grep -v "^#" | grep -v "^$" | head -25
done
kill $SPID; find $R -type f -exec truncate -s 0 {} +
