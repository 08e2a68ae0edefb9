#!/bin/bash
# offcpu.sh FERRY OUT [N]: N uploads of pairs-$TREE/src (256k by default) to a fresh server, with
# sched:sched_switch recorded system-wide (call graphs) during the last; then
#   python3 offcpu.py OUT.perf SERVER_PID CLIENT_PID
# sums, per process and blocking stack, how long its threads were off the CPU, and each CPU's idle time.
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.
set -u
. "$(dirname "$0")/../small-files-s20/lib.sh"
F=$1; OUT=$2; N=${3:-3}
W=${WORK:-/var/tmp/lead/s19}/pairs-${TREE:-256k}
R=${SCRATCH:-/var/tmp}/oroot.$$; mkdir -p $R
serve $F $R
for i in $(seq 1 $N); do
  sleep 2; sync
  if [ $i = $N ]; then perf record -e sched:sched_switch -a -g -o $OUT.perf >/dev/null 2>&1 & PP=$!; sleep 0.5; fi
  c0=$(cpu $SPID); t0=$(date +%s.%N)
  $F cp --json --no-resume -q -r $W/src/ ftp://127.0.0.1:$PORT/t$i/ > $OUT.$i.json 2>/dev/null & CP=$!
  wait $CP
  t1=$(date +%s.%N); c1=$(cpu $SPID)
  [ $i = $N ] && { kill -INT $PP; wait $PP; }
  echo "run $i wall $(echo "$t1-$t0"|bc) srv cpu $(echo "$c1-$c0"|bc)"
done
echo "server $SPID client $CP"
kill $SPID; wait $SPID 2>/dev/null
deleted $R
