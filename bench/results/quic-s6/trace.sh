#!/usr/bin/env bash
# One 128 MiB QUIC download (-p 4) over ferry-wan's 150 Mbit/s, 80 ms one-way
# path with LOSS, untuned hosts, tbf shaper (as `bench/run --scenario quic`),
# traced once a second: the sender's tbf (packets sent, dropped), the sender's
# QUIC connection (quinn's stats) and controller (FERRY_LOG debug).
#   bench/results/quic-s6/trace.sh FERRY LOSS OUTDIR
# Run as root; the namespaces are q6-c/q6-s (ferry-wan removes them).
set -euo pipefail
FERRY=$(realpath "$1"); LOSS=$2; OUT=$3
WAN=${FERRY_WAN:-$(dirname "$0")/../../../target/debug/ferry-wan}
PKI=/tmp/ferry-bench-quic-pki
DATA=${DATA:-/dev/shm/i19s6}
mkdir -p "$OUT"; OUT=$(realpath "$OUT")
# Cold clients, as the bench runs them (no remembered path rate).
export FERRY_PATH_CACHE=off
export FERRY OUT PKI DATA
"$WAN" up --name q6 --delay 80ms --rate 150mbit --loss "$LOSS" --shaper tbf --untuned -- bash -c '
  set -e
  ip netns exec q6-s env FERRY_LOG=ferry_io::transport::quic=debug,ferry_io::transport::quic_cc=debug \
    "$FERRY" serve "$DATA" --listen 10.77.0.2:2121 --anonymous write \
    --tls-cert $PKI/server.pem --tls-key $PKI/server.key > "$OUT/server.log" 2>&1 &
  srv=$!
  sleep 1
  ( while kill -0 $srv 2>/dev/null; do
      echo "$(date +%s.%N) $(tc -s -n q6-s qdisc show dev wan0 | tr "\n" " ")"; sleep 1; done ) > "$OUT/tbf.log" &
  mon=$!
  start=$(date +%s.%N)
  ip netns exec q6-c "$FERRY" cp --json --no-resume --mode extended -p 4 --ca $PKI/ca.pem --transport quic \
    ftps://10.77.0.2:2121/quic-wan-128MiB.bin /dev/null > "$OUT/cp.json" 2> "$OUT/cp.err"
  end=$(date +%s.%N)
  echo "seconds $(echo "$end - $start" | bc) load $(cut -d" " -f1-3 /proc/loadavg)" > "$OUT/summary.txt"
  kill $srv; wait $srv || true; kill $mon || true
' 
cat "$OUT/summary.txt"
