#!/bin/bash
# Runs inside `ferry-wan up ... -- run.sh`: a Ferry server in NAME-s, probes from NAME-c.
set -u
N=$1; F=/work/wt/i17-rate/target/debug/ferry; D=/tmp/i17rate/probe
mkdir -p $D/root
if [ -n "${SMALLBUF:-}" ]; then for s in c s; do ip netns exec $N-$s sysctl -q -w net.ipv4.tcp_rmem="4096 65536 131072" net.ipv4.tcp_wmem="4096 65536 131072"; done; ip netns exec $N-c sysctl net.ipv4.tcp_rmem net.ipv4.tcp_wmem; fi
ip netns exec $N-s $F serve $D/root --listen 10.77.0.2:0 --anonymous read --memory-paths > $D/serve.out 2> $D/serve.log &
SP=$!
for i in $(seq 50); do grep -q "serving" $D/serve.out && break; sleep 0.2; done
URL=$(sed -n 's/.* on \(ftp:\/\/[^ ]*\).*/\1/p' $D/serve.out | head -1)
echo "server $URL"; uptime
for t in tcp udt; do
  FERRY_PATH_CACHE=$D/cache.json ip netns exec $N-c nice -n -5 $F probe --json --transport $t --seconds 10 "${URL%/}/" > $D/probe-$t.json 2> $D/probe-$t.err
  echo "$t rc=$? $(python3 -c "import json;d=json.load(open('$D/probe-$t.json'));m=d['measurement'];print('transport',d['transport'],'bytes',m['bytes'],'s',round(m['seconds'],2),'avg Mbit/s',round(m['bytes']*8/m['seconds']/1e6,2),'steady Mbit/s',m['steady_rate'] and round(m['steady_rate']*8/1e6,2),'streams',m['streams'])" 2>&1)"
  uptime
done
kill $SP; wait $SP 2>/dev/null
