#!/bin/bash
# runs inside ferry-wan up: per row one ferry serve in -s (row env), ferry cp in -c; logs in $OUT
set -u
F=${FERRY:-/work/wt/i19-s4/target/debug/ferry}
P=/tmp/ferry-bench-quic-pki
OUT=${OUT:-/tmp/i19s4/run}
mkdir -p $OUT
N=${NAME:-i19s4}
for rep in $(seq ${REPS:-1}); do
for row in ${ROWS:-quic}; do
  case $row in
    quic*) T=quic ;; ftps*) T=tcp ;; esac
  E=""; case $row in *:*) E="${row#*:}"; E="${E//,/ }" ;; esac
  env $E FERRY_LOG=${SLOG:-info} ip netns exec $N-s $F serve /dev/shm/i19s4 --listen 10.77.0.2:0 --anonymous write --tls-cert $P/server.pem --tls-key $P/server.key > $OUT/serve-$row.out 2> $OUT/serve-$row.err &
  SP=$!
  for i in $(seq 100); do grep -q serving $OUT/serve-$row.out 2>/dev/null && break; sleep 0.1; done
  PORT=$(head -1 $OUT/serve-$row.out | sed -E 's#.*:([0-9]+)/.*#\1#')
  s=$(date +%s.%N)
  env $E FERRY_LOG=${CLOG:-info} ip netns exec $N-c $F cp --json --no-resume --mode extended -p ${P4:-4} --ca $P/ca.pem --transport $T ftps://10.77.0.2:$PORT/wan.bin /dev/null > $OUT/cp-$row.out 2> $OUT/cp-$row.err
  rc=$?
  e=$(date +%s.%N)
  echo "$row rc=$rc secs=$(echo "$e - $s" | bc) MBps=$(echo "134.217728 / ($e - $s)" | bc -l | cut -c1-6) link=$(echo "134.217728 / ($e - $s) / 18.75" | bc -l | cut -c1-5) load=$(cut -d' ' -f1-3 /proc/loadavg)"
  if [ -n "${DIAG:-}" ]; then ip netns exec $N-s tc -s qdisc show dev wan0 | tr '\n' ' '; echo; for ns in c s; do echo "$ns: $(ip netns exec $N-$ns cat /proc/net/snmp | grep Udp: | tail -1)"; done; fi
  kill $SP; wait $SP 2>/dev/null
done; done
