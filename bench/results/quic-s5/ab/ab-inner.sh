#!/bin/bash
# Runs inside `ferry-wan up --name $N -- ab-inner.sh`: each LABEL=BINARY[:ENV=V...] argument, in turn,
# REPS times, interleaved; prints one line per run (label, seconds, MB/s).
N=$AB_NAME; PKI=/tmp/ferry-bench-quic-pki; REPS=${AB_REPS:-1}; P=${AB_P:-4}
OUT=${AB_OUT:-/tmp/i19s5/out}; mkdir -p $OUT
port=2811
for rep in $(seq 1 $REPS); do
for spec in "$@"; do
  flags=""; case "$spec" in *+*) flags=$(echo "${spec#*+}" | tr '+' ' '); spec=${spec%%+*};; esac
  label=${spec%%=*}; rest=${spec#*=}; bin=${rest%%:*}; envs=""; [ "$rest" != "$bin" ] && envs=$(echo ${rest#*:} | tr ':' ' ')
  port=$((port+1))
  log=$OUT/$label-$rep-server.log; clog=$OUT/$label-$rep-client.log
  ip netns exec $N-s env FERRY_LOG=${AB_LOG:-info} $envs $bin serve /dev/shm/i19s5 --listen 10.77.0.2:$port --anonymous write \
     --tls-cert $PKI/server.pem --tls-key $PKI/server.key > $log 2>&1 &
  spid=$!
  for i in $(seq 50); do ip netns exec $N-s ss -ltn | grep -q ":$port " && break; sleep 0.1; done
  t0=$(date +%s.%N)
  ip netns exec $N-c env FERRY_LOG=${AB_LOG:-info} $envs $bin cp --json --no-resume --mode extended -p $P --ca $PKI/ca.pem --transport quic $flags \
     ftps://10.77.0.2:$port/quic-wan.bin /dev/null > $clog 2>&1
  rc=$?
  t1=$(date +%s.%N)
  kill $spid; wait $spid 2>/dev/null
  s=$(echo "$t1 - $t0" | bc)
  echo "$label rep$rep rc=$rc seconds=$s MB/s=$(echo "scale=2; 134.217728 / $s" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
done
done
