#!/bin/bash
# prof.sh FERRY OUT [N]: N uploads of pairs-$TREE/src (TREE=256k by default) to a fresh server, perf on the server during the last
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.
set -u
. "$(dirname "$0")/lib.sh"
F=$1; OUT=$2; N=${3:-3}
W=${WORK:-/var/tmp/lead/s19}/pairs-${TREE:-256k}
R=${SCRATCH:-/var/tmp}/proot.$$; mkdir -p $R
PORT=$(port)
$F serve $R --listen 127.0.0.1:$PORT --anonymous write >$OUT.serve.log 2>&1 & SPID=$!
sleep 1
cpu_us() { awk '{printf "%.2f %.2f", $14/100, $15/100}' /proc/$1/stat; }
for i in $(seq 1 $N); do
  sleep 2; sync
  if [ $i = $N ]; then perf record -e cpu-clock -F 1999 -g -p $SPID -o $OUT.perf >/dev/null 2>&1 & PP=$!; sleep 0.5; fi
  c0=($(cpu_us $SPID)); t0=$(date +%s.%N)
  /usr/bin/time -f "cli %U u %S s" $F cp --json --no-resume -q -r $W/src/ ftp://127.0.0.1:$PORT/t$i/ > $OUT.$i.json 2>$OUT.time
  t1=$(date +%s.%N); c1=($(cpu_us $SPID))
  [ $i = $N ] && { kill -INT $PP; wait $PP; }
  echo "run $i wall $(echo "$t1-$t0"|bc) srv u $(echo "${c1[0]}-${c0[0]}"|bc) s $(echo "${c1[1]}-${c0[1]}"|bc) $(cat $OUT.time)"
done
kill $SPID; wait $SPID 2>/dev/null
deleted $R
