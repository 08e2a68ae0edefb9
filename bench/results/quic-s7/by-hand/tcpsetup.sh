#!/usr/bin/env bash
# Set-up time of TCP downloads (1 MiB, -p 4) over ferry-wan's 150 Mbit/s, 80 ms, 1 % path: ftp:// and ftps://, 3 each.
set -euo pipefail
FERRY=$(realpath "$1"); OUT=$2; NAME=${3:-i19ts}
WAN=/work/main/target/debug/ferry-wan
PKI=/tmp/ferry-bench-quic-pki
DATA=/dev/shm/$NAME
mkdir -p "$OUT" "$DATA"; OUT=$(realpath "$OUT")
head -c $((1<<20)) /dev/urandom > $DATA/f.bin
export FERRY OUT PKI DATA NAME FERRY_PATH_CACHE=off
"$WAN" up --name $NAME --delay 80ms --rate 150mbit --loss 1% --shaper tbf --untuned -- bash -c '
  set -e
  FERRY_LOG=debug ip netns exec $NAME-s "$FERRY" serve "$DATA" --listen 10.77.0.2:2121 --anonymous write \
    --tls-cert $PKI/server.pem --tls-key $PKI/server.key > "$OUT/server.log" 2>&1 &
  srv=$!
  sleep 1
  for scheme in ftp ftps; do for i in 1 2 3; do
    start=$(date +%s.%N)
    ip netns exec $NAME-c "$FERRY" cp --no-resume --mode extended -p 4 --ca $PKI/ca.pem \
      $scheme://10.77.0.2:2121/f.bin /dev/null > /dev/null 2> "$OUT/cp-$scheme-$i.err"
    end=$(date +%s.%N)
    echo "$scheme $i: $(echo "$end - $start" | bc) s (1 MiB), load $(cut -d" " -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
  done; done
  kill $srv; wait $srv || true
'
rm -rf $DATA
