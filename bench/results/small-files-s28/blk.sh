#!/usr/bin/env bash
# blk.sh OUT ROW...: the mixed tree's loopback upload by each ROW (a ferry binary, or
# "floor" for floor_tree.py DIR 32), alternating, ROUNDS times, with the block layer's
# requests recorded (perf block:block_rq_issue); prints wall and requests by kind.
# Outputs are truncated, not deleted (ext4 scans past recently freed inodes).
set -u
. "$(dirname "$(readlink -f "$0")")/../small-files-s20/lib.sh"  # port, serve, warm (and waits out recent deletes)
OUT=$1; shift; R=${ROUNDS:-2}; HERE=$(dirname "$(readlink -f "$0")")
SRC=/var/tmp/lead/s19/pairs-mixed/src
mkdir -p $OUT
for r in $(seq 1 $R); do for b in "$@"; do
  n=$(basename $b); root=$OUT/root-$n-$r-$RANDOM; mkdir -p $root
  if [ $b != floor ]; then
        serve $b $root
  fi
  [ $b = floor ] && sleep 1; warm $SRC; sync
  perf record -q -e block:block_rq_issue -a -o $OUT/$n-$r.perf 2>/dev/null & pp=$!; sleep 0.5
  t0=$(date +%s.%N)
  if [ $b = floor ]; then python3 $HERE/floor_tree.py $root/t 32; else $b cp -q -r $SRC/ ftp://127.0.0.1:$PORT/t/; fi
  t1=$(date +%s.%N)
  sleep 0.3; kill -INT $pp; wait $pp; [ $b != floor ] && { kill $SPID; wait $SPID 2>/dev/null; }
  perf script -i $OUT/$n-$r.perf -F trace 2>/dev/null | python3 -c "
import sys,re,collections
c=collections.Counter(); kb=collections.Counter()
for l in sys.stdin:
    m=re.search(r'\d+,\d+ (\S+) (\d+) \(.*?\) \d+ \+ (\d+)',l)
    if not m: continue
    rw=m.group(1); k='discard' if 'D' in rw else 'flush' if rw.startswith('F') else 'meta-write' if 'W' in rw and 'M' in rw else 'data-write' if 'W' in rw else 'read'
    c[k]+=1; kb[k]+=int(m.group(3))*512
print('$n round $r wall %.2f s; '%($t1-$t0)+', '.join(f'{k} {c[k]} ({kb[k]//(1<<20)} MiB)' for k in ['data-write','meta-write','discard','flush','read']))"
  find $root -type f -exec truncate -s 0 {} +; rm -f $OUT/$n-$r.perf
done; done
