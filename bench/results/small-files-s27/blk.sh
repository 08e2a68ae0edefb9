#!/usr/bin/env bash
# blk.sh OUT BIN...: one mixed-tree loopback upload per binary (alternating, ROUNDS times), each with
# the block layer's requests recorded (perf block:block_rq_issue); prints wall and requests by kind.
set -u
OUT=$1; shift; R=${ROUNDS:-2}
SRC=/var/tmp/lead/s19/pairs-mixed/src
mkdir -p $OUT
for r in $(seq 1 $R); do for b in "$@"; do
  n=$(basename $b); root=$OUT/root-$n-$r; mkdir -p $root
  port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
  $b serve $root --listen 127.0.0.1:$port --anonymous write >/dev/null 2>&1 & spid=$!
  sleep 1; cat $SRC/* > /dev/null
  perf record -q -e block:block_rq_issue -a -o $OUT/$n-$r.perf 2>/dev/null & pp=$!; sleep 0.5
  t0=$(date +%s.%N); $b cp -q -r $SRC/ ftp://127.0.0.1:$port/t/; t1=$(date +%s.%N)
  sleep 0.3; kill -INT $pp; wait $pp; kill $spid; wait $spid 2>/dev/null
  perf script -i $OUT/$n-$r.perf -F trace 2>/dev/null | python3 -c "
import sys,re,collections
c=collections.Counter()
for l in sys.stdin:
    m=re.search(r'\d+,\d+ (\S+) (\d+) \(.*?\) \d+ \+ (\d+)',l)
    if not m: continue
    rw=m.group(1); k='discard' if 'D' in rw else 'flush' if rw.startswith('F') else 'meta-write' if 'W' in rw and 'M' in rw else 'data-write' if 'W' in rw else 'read'
    c[k]+=1
print('$n round $r wall %.2f s; '%($t1-$t0)+', '.join(f'{k} {c[k]}' for k in ['data-write','meta-write','discard','flush','read']))"
  rm -rf $root $OUT/$n-$r.perf
done; done
touch /var/tmp/lead/s19/.deleted
