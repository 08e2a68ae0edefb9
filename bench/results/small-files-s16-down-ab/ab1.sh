#!/bin/bash
# One-file A/B on loopback: download (ferry cp from ferry serve) and upload,
# new vs old build interleaved. Usage: ab1.sh NEW OLD ROUNDS SIZE_MIB OUT
NEW=$1; OLD=$2; ROUNDS=${3:-3}; MIB=${4:-1024}; OUT=${5:-/dev/stdout}
W=/var/tmp/s16-down/ab1; mkdir -p $W/srv/up $W/loc
[ -s $W/srv/big ] && [ $(stat -c %s $W/srv/big) = $((MIB<<20)) ] || head -c $((MIB<<20)) /dev/urandom > $W/srv/big
[ -s $W/loc/big ] && [ $(stat -c %s $W/loc/big) = $((MIB<<20)) ] || cp $W/srv/big $W/loc/big
cat $W/srv/big $W/loc/big > /dev/null
start() { # $1 binary -> sets PORT, SPID
  rm -f $W/serve.log; "$1" serve $W/srv --listen 127.0.0.1:0 --anonymous write > $W/serve.log 2>&1 & SPID=$!
  for i in $(seq 50); do PORT=$(grep -o '127.0.0.1:[0-9]*' $W/serve.log | head -1 | cut -d: -f2); [ -n "$PORT" ] && break; sleep 0.1; done
}
one() { # $1 label $2 binary $3 dir
  local b=$2; start $b
  sync; sleep 2
  local t0=$(date +%s.%N)
  if [ $3 = down ]; then /usr/bin/time -f "%U %S" -o $W/cpu $b cp -q --no-resume ftp://127.0.0.1:$PORT/big $W/loc/got > /dev/null
  else /usr/bin/time -f "%U %S" -o $W/cpu $b cp -q --no-resume $W/loc/big ftp://127.0.0.1:$PORT/up/big > /dev/null; fi
  local rc=$?; local t1=$(date +%s.%N)
  kill $SPID; wait $SPID 2>/dev/null
  echo "$1 $3 rc=$rc $(echo "$t1 - $t0" | bc) s $(echo "$MIB*1.048576/($t1-$t0)" | bc) MB/s cpu_us=$(cat $W/cpu | tr " " "+") load=$(cut -d' ' -f1 /proc/loadavg)" | tee -a $OUT
  rm -f $W/loc/got $W/srv/up/big
}
for r in $(seq $ROUNDS); do
  for d in ${DIRS:-down up}; do
    if [ $((r%2)) = 1 ]; then one new $NEW $d; one old $OLD $d; else one old $OLD $d; one new $NEW $d; fi
  done
done
