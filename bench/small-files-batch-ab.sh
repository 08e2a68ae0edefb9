#!/bin/bash
# Batch (BRET/BSTO) against the pipelined path, same ferry binary: ferry cp -r against a ferry serve
# that lists BATCH and one started with --no-batch, alternating, downloads and uploads, loopback.
# Usage: F=target/release/ferry ROOT=/var/tmp/sf-run REPS=3 bench/small-files-batch-ab.sh TREE   (TREE under ROOT/data)
F=${F:-target/release/ferry}
ROOT=${ROOT:-/var/tmp/ferry-small-files}
TREE=$1   # directory name under $ROOT/data
REPS=${REPS:-3}
mkdir -p /var/tmp/ab
start() { $F serve $ROOT --listen 127.0.0.1:0 --anonymous write $1 > /var/tmp/ab/s$2.out 2>/var/tmp/ab/s$2.err & echo $! > /var/tmp/ab/s$2.pid; sleep 0.5; head -1 /var/tmp/ab/s$2.out | sed 's/.*://; s/\///'; }
PA=$(start "" a); PB=$(start --no-batch b)
for r in $(seq $REPS); do
  for v in a b; do
    P=$PA; [ $v = b ] && P=$PB
    rm -rf /var/tmp/ab/dl $ROOT/up-$v
    L=$(cut -d' ' -f1 /proc/loadavg)
    t0=$(date +%s.%N); $F cp -r -q --no-resume ftp://127.0.0.1:$P/data/$TREE/ /var/tmp/ab/dl/ >/dev/null 2>/tmp/ab.err || echo "FAIL down $v $(tail -c 300 /tmp/ab.err)"; t1=$(date +%s.%N)
    n=$(ls /var/tmp/ab/dl | wc -l)
    t2=$(date +%s.%N); $F cp -r -q --no-resume $ROOT/data/$TREE/ ftp://127.0.0.1:$P/up-$v/ >/dev/null 2>/tmp/ab.err || echo "FAIL up $v $(tail -c 300 /tmp/ab.err)"; t3=$(date +%s.%N)
    m=$(ls $ROOT/up-$v | wc -l)
    echo "$TREE rep$r $([ $v = a ] && echo batch || echo pipelined) down $(echo "$t1-$t0"|bc) s ($n files) up $(echo "$t3-$t2"|bc) s ($m files) load $L"
  done
done
kill $(cat /var/tmp/ab/sa.pid) $(cat /var/tmp/ab/sb.pid)
