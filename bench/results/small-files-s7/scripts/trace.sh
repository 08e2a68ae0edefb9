#!/bin/bash
# usage: F=binary LOG=level D=outdir trace.sh   (run inside ferry-wan up --name X)
F=${F:-/var/tmp/old-s6/ferry}
D=${D:-/var/tmp/i18s6/tr/run}
LOG=${LOG:-info}
TREE=${TREE:-5000x4KiB}
DATA=${DATA:-/var/tmp/sf-s5/data}
NS=${NS:-i18t}
DST=${DST:-$D/dst}; rm -rf $D $DST; mkdir -p $D $DST
FERRY_LOG=$LOG ip netns exec $NS-s $F serve $DATA --listen 10.77.0.2:2121 --anonymous ${ACCESS:-read} > $D/serve.log 2>&1 &
SP=$!
sleep 1
start=$(date +%s.%N)
( for i in $(seq 1 24); do sleep 0.25; echo "t=$(echo "$(date +%s.%N) - $start" | bc | cut -c1-4) named=$(find $DST -type f -name 'f*.dat' -not -path '*/.*' | wc -l) all=$(find $DST -type f | wc -l)"; done ) > $D/count.txt &
WP=$!
echo "start $(date -u +%H:%M:%S.%N)" > $D/start.txt
FERRY_LOG=$LOG timeout 60 /usr/bin/time -f "client cpu user %U sys %S wall %e" -o $D/time.txt ip netns exec $NS-c $F cp --json --no-resume -q -r $EXTRA ftp://10.77.0.2:2121/$TREE/ $DST/ > $D/cp.json 2> $D/cp.log
echo "exit $? after $(echo "$(date +%s.%N) - $start" | bc) s; files: $(find $DST -type f | wc -l)" | tee $D/result.txt
kill $SP; kill $WP 2>/dev/null; wait $WP 2>/dev/null
