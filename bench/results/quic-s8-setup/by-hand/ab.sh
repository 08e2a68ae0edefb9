#!/usr/bin/env bash
# Cold QUIC downloads (128 MiB, -p 4, no path cache), OLD and NEW alternating, in one ferry-wan session
# (150 Mbit/s, 80 ms one way, 1 % loss each way, tbf, untuned). bash ab.sh OLD NEW OUT N
set -euo pipefail
OLD=$(realpath "$1"); NEW=$(realpath "$2"); OUT=$3; N=${4:-4}
WAN=${WAN:-/work/main/target/debug/ferry-wan}
PKI=/tmp/ferry-bench-quic-pki
DATA=/dev/shm/s8-setup-ab
mkdir -p "$OUT" "$DATA"; OUT=$(realpath "$OUT")
head -c $((128<<20)) /dev/urandom > $DATA/f.bin
export OLD NEW OUT PKI DATA N FERRY_PATH_CACHE=off
"$WAN" up --name s8ab --delay 80ms --rate 150mbit --loss 1% --shaper tbf --untuned -- bash -c '
  set -e
  FERRY_LOG=ferry_io::transport::quic=debug ip netns exec s8ab-s "$OLD" serve "$DATA" --listen 10.77.0.2:2121 --anonymous write \
    --tls-cert $PKI/server.pem --tls-key $PKI/server.key > "$OUT/server-old.log" 2>&1 &
  s1=$!
  FERRY_LOG=ferry_io::transport::quic=debug ip netns exec s8ab-s "$NEW" serve "$DATA" --listen 10.77.0.2:2122 --anonymous write \
    --tls-cert $PKI/server.pem --tls-key $PKI/server.key > "$OUT/server-new.log" 2>&1 &
  s2=$!
  sleep 1
  for i in $(seq 1 $N); do for which in old new; do
    if [ $which = old ]; then F=$OLD; P=2121; else F=$NEW; P=2122; fi
    start=$(date +%s.%N)
    ip netns exec s8ab-c "$F" cp --json --no-resume --mode extended -p 4 --ca $PKI/ca.pem --transport quic \
      ftps://10.77.0.2:$P/f.bin /dev/null > "$OUT/cp-$which-$i.json" 2> "$OUT/cp-$which-$i.err"
    end=$(date +%s.%N)
    s=$(echo "$end - $start" | bc)
    echo "$which $i: $s s, $(echo "scale=2; 134217728 / $s / 1000000" | bc) MB/s, load $(cut -d" " -f1-3 /proc/loadavg)" | tee -a "$OUT/summary.txt"
  done; done
  kill $s1 $s2; wait $s1 $s2 || true
'
rm -rf $DATA
