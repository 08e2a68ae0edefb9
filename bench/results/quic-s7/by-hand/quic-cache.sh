#!/usr/bin/env bash
# Three successive 128 MiB QUIC downloads (-p 4) over ferry-wan's 150 Mbit/s, 80 ms one-way, 1 % loss path
# (untuned, tbf), as bench/results/quic-s6/trace.sh runs one, but with a path cache file: the first copy
# starts cold, the later ones at the rate the cache remembers.  bash quic-cache.sh FERRY OUTDIR
set -euo pipefail
FERRY=$(realpath "$1"); OUT=$2
WAN=/work/main/target/debug/ferry-wan
PKI=/tmp/ferry-bench-quic-pki
DATA=/dev/shm/i19-qc
mkdir -p "$OUT" "$DATA"; OUT=$(realpath "$OUT")
head -c $((128<<20)) /dev/urandom > $DATA/quic-wan-128MiB.bin
export FERRY_PATH_CACHE=$OUT/path-cache.json
rm -f $FERRY_PATH_CACHE
export FERRY OUT PKI DATA
"$WAN" up --name qi19 --delay 80ms --rate 150mbit --loss 1% --shaper tbf --untuned -- bash -c '
  set -e
  FERRY_LOG=ferry_io::transport::quic=debug,ferry_io::transport::quic_cc=debug ip netns exec qi19-s "$FERRY" serve "$DATA" --listen 10.77.0.2:2121 --anonymous write \
    --tls-cert $PKI/server.pem --tls-key $PKI/server.key > "$OUT/server.log" 2>&1 &
  srv=$!
  sleep 1
  for i in 1 2 3; do
    start=$(date +%s.%N)
    ip netns exec qi19-c "$FERRY" cp --json --no-resume --mode extended -p 4 --ca $PKI/ca.pem --transport quic \
      ftps://10.77.0.2:2121/quic-wan-128MiB.bin /dev/null > "$OUT/cp$i.json" 2> "$OUT/cp$i.err"
    end=$(date +%s.%N)
    s=$(echo "$end - $start" | bc)
    echo "copy $i: $s s, $(echo "scale=2; 134217728 / $s / 1000000" | bc) MB/s, load $(cut -d" " -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
    grep -o "start[^,]*" "$OUT/cp$i.err" | head -2 || true
  done
  kill $srv; wait $srv || true
'
cat "$OUT/summary.txt"; cat $FERRY_PATH_CACHE
rm -rf $DATA
