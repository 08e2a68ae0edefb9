#!/usr/bin/env bash
# One cold QUIC download and one upload (128 MiB, -p 4) over ferry-wan's 150 Mbit/s, 80 ms, 1 % path, debug logs.
set -euo pipefail
FERRY=$(realpath "$1"); OUT=$2; NAME=${3:-i19tl}
WAN=/work/main/target/debug/ferry-wan
PKI=/tmp/ferry-bench-quic-pki
DATA=/dev/shm/$NAME
mkdir -p "$OUT" "$DATA/up"; OUT=$(realpath "$OUT")
head -c $((128<<20)) /dev/urandom > $DATA/f.bin
export FERRY OUT PKI DATA NAME FERRY_PATH_CACHE=off
"$WAN" up --name $NAME --delay 80ms --rate 150mbit --loss 1% --shaper tbf --untuned -- bash -c '
  set -e
  FERRY_LOG=debug ip netns exec $NAME-s "$FERRY" serve "$DATA" --listen 10.77.0.2:2121 --anonymous write \
    --tls-cert $PKI/server.pem --tls-key $PKI/server.key > "$OUT/server.log" 2>&1 &
  srv=$!
  sleep 1
  for dir in down up; do
    start=$(date +%s.%N)
    if [ $dir = down ]; then src=ftps://10.77.0.2:2121/f.bin; dst=/dev/null; else src=$DATA/f.bin; dst=ftps://10.77.0.2:2121/up/f.bin; fi
    echo "$dir start $(date -u +%H:%M:%S.%N)" >> "$OUT/summary.txt"
    FERRY_LOG=debug ip netns exec $NAME-c "$FERRY" cp --json --no-resume --mode extended -p 4 --ca $PKI/ca.pem --transport quic \
      $src $dst > "$OUT/cp-$dir.json" 2> "$OUT/cp-$dir.err"
    end=$(date +%s.%N)
    s=$(echo "$end - $start" | bc)
    echo "$dir: $s s, $(echo "scale=2; 134217728 / $s / 1000000" | bc) MB/s, load $(cut -d" " -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
  done
  kill $srv; wait $srv || true
'
rm -rf $DATA
