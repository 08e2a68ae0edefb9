#!/bin/bash
# Tree download A/B on loopback, new vs old interleaved (each build's client
# against its own server). Usage: abtree.sh NEW OLD ROUNDS TREES OUT
NEW=$1; OLD=$2; ROUNDS=$3; TREES=$4; OUT=$5
D=/var/tmp/s16-down/w1/data; W=/var/tmp/s16-down/abt; mkdir -p $W/dst
start() { rm -f $W/$1.log; "$2" serve $D --listen 127.0.0.1:0 --anonymous read > $W/$1.log 2>&1 & echo $! > $W/$1.pid
  for i in $(seq 50); do p=$(grep -o '127.0.0.1:[0-9]*' $W/$1.log | head -1 | cut -d: -f2); [ -n "$p" ] && break; sleep 0.1; done; echo $p > $W/$1.port; }
start new $NEW; start old $OLD
one() { # label tree
  local b=$NEW; [ $1 = old ] && b=$OLD; local port=$(cat $W/$1.port); local dst=$W/dst/$1-$2-$RANDOM$RANDOM
  local t0=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o $W/cpu $b cp --json --no-resume -q -r ftp://127.0.0.1:$port/$2/ $dst/ > $W/last-$1.json
  local rc=$?; local t1=$(date +%s.%N)
  echo "$1 $2 rc=$rc wall=$(echo "$t1 - $t0" | bc) cpu=$(cat $W/cpu | tr ' ' '+' | bc) sync=$(python3 -c "import json;print(round(json.load(open('$W/last-$1.json'))['sync_seconds'],3))") load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a $OUT
  find $dst -type f -exec truncate -s 0 {} + ; sync; sleep 2
}
for r in $(seq $ROUNDS); do for t in $TREES; do
  if [ $((r%2)) = 1 ]; then one new $t; one old $t; else one old $t; one new $t; fi
done; done
kill $(cat $W/new.pid) $(cat $W/old.pid)
