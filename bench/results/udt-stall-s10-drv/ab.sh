#!/usr/bin/env bash
# Bounded stall A/B under load: 6 busy loops (<=LOADSECS, killed by PID) + udt loopback copies
# (1 GiB tmpfs -> /dev/null, -p 1 and -p 4, 40 s client timeout), old and new interleaved, traced.
NEW=$1 OLD=$2 OUT=$3 LOADSECS=${4:-170}
R=/var/tmp/s10-drv-repro/$OUT; mkdir -p $R
D=/dev/shm/s10-drv-lo; mkdir -p $D
[ -f $D/f.bin ] || head -c $((1<<30)) /dev/urandom > $D/f.bin
for who in new old; do
  B=$NEW; [ $who = old ] && B=$OLD
  mkdir -p $R/trace-srv-$who $R/trace-cli-$who
  FERRY_UDT_TRACE=$R/trace-srv-$who $B serve $D --listen 127.0.0.1:0 --anonymous read > $R/server-$who.log 2>&1 &
  echo $! > $R/$who.pid
done
sleep 1
port() { grep -oE "127\.0\.0\.1:[0-9]+" $R/server-$1.log | head -1 | cut -d: -f2; }
PIDS=""
for i in 1 2 3 4 5 6; do ( end=$((SECONDS+LOADSECS)); while [ $SECONDS -lt $end ]; do :; done ) & PIDS="$PIDS $!"; done
end=$((SECONDS+LOADSECS-10))
n=0
while [ $SECONDS -lt $end ]; do
  for p in 1 4; do for who in old new; do
    B=$NEW; [ $who = old ] && B=$OLD
    n=$((n+1)); s=$(date +%s.%N)
    FERRY_UDT_TRACE=$R/trace-cli-$who timeout 40 $B cp --json --no-resume --mode extended -p $p --transport udt ftp://127.0.0.1:$(port $who)/f.bin /dev/null > $R/cp-$n.json 2>$R/cp-$n.err; rc=$?
    e=$(date +%s.%N)
    echo "$n $who -p $p rc=$rc $(echo "scale=1; ($e - $s)/1" | bc) s $(echo "scale=0; 1073.741824 / ($e - $s)" | bc) MB/s load $(cut -d' ' -f1 /proc/loadavg)"
  done; done
done
kill $PIDS 2>/dev/null
sleep 1; kill $(cat $R/new.pid) $(cat $R/old.pid)
