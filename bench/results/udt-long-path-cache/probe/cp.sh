#!/bin/bash
set -u
N=$1; F=/work/wt/i17-rate/target/debug/ferry; D=/tmp/i17rate/probe
ip netns exec $N-s $F serve $D/root --listen 10.77.0.2:0 --anonymous read --memory-paths > $D/serve.out 2> $D/serve.log &
SP=$!
for i in $(seq 50); do grep -q "serving" $D/serve.out && break; sleep 0.2; done
URL=$(sed -n 's/.* on \(ftp:\/\/[^ ]*\).*/\1/p' $D/serve.out | head -1); URL=${URL%/}
echo "server $URL"
FERRY_PATH_CACHE=$D/cache.json ip netns exec $N-c nice -n -5 $F probe --json --transport udt --seconds 10 "$URL/" > $D/cp-probe.json 2>&1
echo "probe udt: $(grep -o '"steady_rate": [0-9.]*' $D/cp-probe.json)"
for i in 1 2; do
  for mode in cold warm; do
    if [ $mode = cold ]; then C=off; else C=$D/cache.json; fi
    rm -f $D/dst.bin; L=$(cut -d' ' -f1 /proc/loadavg)
    FERRY_PATH_CACHE=$C ip netns exec $N-c nice -n -5 $F cp --json --transport udt --no-resume "$URL/f256.bin" $D/dst.bin > $D/cp-$mode-$i.json 2>/dev/null
    python3 -c "
import json;d=json.load(open('$D/cp-$mode-$i.json'))
a=d['path_rate']['announced']
print('$mode $i', 'seconds', round(d['seconds'],2), 'Mbit/s', round(d['bytes']*8/d['seconds']/1e6,2), 'start', d['udt']['congestion'][:40], 'announced', a and round(a[0]['rate']), 'load $L')"
  done
done
kill $SP; wait $SP 2>/dev/null
