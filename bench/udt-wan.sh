#!/usr/bin/env bash
# UDT on emulated long paths (ferry-wan, needs root): one link per loss rate,
# and in each link, one after the other:
#   * Ferry's default controller from cold, and started at the link rate (as
#     when `ferry probe` measured the path);
#   * UDT's DAIMD in Ferry (`--cc udt`);
#   * UDT4's own example programs, unchanged (sendfile serving a file from
#     tmpfs, recvfile writing to tmpfs; MSS 1500, as the examples do not set it);
#   * iperf3, one TCP stream, CUBIC and BBR (tuned 64 MiB TCP buffers).
# Every sender runs SECS seconds; the rate is what the receiver got over its
# own elapsed time (start-up and the final drain included). Each row is given
# as Mbit/s of payload, as a share of the link, and as a share of the better
# iperf3 row of the same link (same run, same machine load).
#   bench/udt-wan.sh [SECS] [DELAY_MS] [RATE_MBIT] [LOSS...]
# e.g. bench/udt-wan.sh 20 80 150 0% 1% 5%   (writes bench/results/udt/)
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
DELAY=${2:-80}
RATE=${3:-150}
shift 3 2>/dev/null || shift $#
LOSSES=("$@")
[ ${#LOSSES[@]} -eq 0 ] && LOSSES=(0% 1% 5%)
nice -n 5 cargo build --release -q -p ferry-io --example udt_perf || exit 1
nice -n 5 cargo build --release -q -p ferry-wan || exit 1
FERRY=$PWD/target/release/examples/udt_perf
WORK=$(mktemp -d /dev/shm/udtw.XXXX)
trap 'rm -rf "$WORK"' EXIT
EX=/usr/share/doc/libudt-dev/examples
cp "$EX"/{cc.h,test_util.h,sendfile.cpp,recvfile.cpp} "$WORK"/
for p in sendfile recvfile; do
  g++ -O2 -w -DLINUX -I/usr/include/udt -o "$WORK/$p" "$WORK/$p.cpp" -ludt -lpthread || exit 1
done
# a file larger than the link can carry in SECS
head -c $((RATE * 1000000 / 8 * (SECS + 5))) /dev/urandom > "$WORK/file.bin"
RTT=$((2 * DELAY))
OUT=bench/results/udt
mkdir -p "$OUT"
RESULT=$OUT/wan-${RATE}mbit-${DELAY}ms.md
inner=$WORK/inner.sh
cat > "$inner" <<INNER
set -u
out=\$(mktemp)
S=\$FERRY_WAN_SERVER_IP
C=\$FERRY_WAN_CLIENT_IP
P="--mss 9000 --rtt-ms $RTT --rate-mbit $RATE"
# name, Mbit/s
emit() { echo "\$1 \$2" >> "$WORK/rows"; }
ferry_row() {
  local name=\$1; shift
  local extra_s=\$1; shift
  : > "\$out"
  timeout \$(($SECS + 150)) ip netns exec \$FERRY_WAN_SERVER_NS $FERRY server \$S:0 recv 1000000000000 \$P \$extra_s > "\$out" 2>/dev/null &
  local spid=\$!
  for _ in \$(seq 100); do grep -q PORT "\$out" && break; sleep 0.1; done
  local port; port=\$(awk '/PORT/{print \$2}' "\$out")
  timeout \$(($SECS + 150)) ip netns exec \$FERRY_WAN_CLIENT_NS $FERRY client \$S:\$port send 1000000000000 --seconds $SECS \$P "\$@" > /dev/null 2>&1
  wait \$spid
  local s; s=\$(grep '^OK' "\$out")
  if [ -z "\$s" ]; then emit "\$name" failed; return; fi
  read -r _ b secs _ <<< "\$s"
  emit "\$name" "\$(python3 -c "print(\$b*8/\$secs/1e6)")"
}
libudt_row() {
  # sendfile serves from the client's side, recvfile pulls it to the
  # server's: data flows client -> server like every other row.
  local port=9$((RANDOM % 900 + 100))
  ( cd $WORK && exec ip netns exec \$FERRY_WAN_CLIENT_NS ./sendfile \$port ) > /dev/null 2>&1 &
  local spid=\$!
  sleep 1
  rm -f $WORK/copy.bin
  local t0; t0=\$(date +%s.%N)
  timeout $SECS ip netns exec \$FERRY_WAN_SERVER_NS $WORK/recvfile \$C \$port file.bin $WORK/copy.bin > /dev/null 2>&1
  local t1; t1=\$(date +%s.%N)
  local b; b=\$(stat -c %s $WORK/copy.bin 2>/dev/null || echo 0)
  kill \$spid 2>/dev/null; wait \$spid 2>/dev/null
  rm -f $WORK/copy.bin
  emit "UDT4 sendfile → recvfile (libudt 4.11, MSS 1500)" "\$(python3 -c "print(\$b*8/(\$t1-\$t0)/1e6)")"
}
iperf_row() {
  local cc=\$1
  ip netns exec \$FERRY_WAN_SERVER_NS iperf3 -s -1 -p 5201 > /dev/null 2>&1 &
  local spid=\$!
  sleep 0.5
  local j; j=\$(ip netns exec \$FERRY_WAN_CLIENT_NS iperf3 -c \$S -p 5201 -t $SECS -C \$cc -J 2>/dev/null)
  wait \$spid
  emit "iperf3 \$cc, 1 stream" "\$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['end']['sum_received']['bits_per_second']/1e6)" "\$j" 2>/dev/null || echo failed)"
}
: > $WORK/rows
ferry_row "Ferry, ferry cc from cold" ""
ferry_row "Ferry, ferry cc started at the link rate" "" --start-mbit $RATE
ferry_row "Ferry, udt cc (DAIMD)" "--cc udt" --cc udt
libudt_row
iperf_row cubic
iperf_row bbr
INNER
{
  echo "# UDT on an emulated long path: ${RATE} Mbit/s, ${DELAY} ms one way"
  echo
  echo "\`bench/udt-wan.sh $SECS $DELAY $RATE ${LOSSES[*]}\` — $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores,"
  echo "load average at the start $(cut -d' ' -f1-3 /proc/loadavg); ferry-wan forwarder shaping, MTU 9000, default"
  echo "queue (200 ms at the rate + 256 KiB), random loss each way; each sender ${SECS} s; Mbit/s of payload."
  echo "Ferry uses MSS 9000; UDT4's example programs use their default MSS 1500."
  echo
} > "$RESULT"
for LOSS in "${LOSSES[@]}"; do
  NAME=udtw$$
  target/release/ferry-wan up --name "$NAME" --delay "${DELAY}ms" --rate "${RATE}mbit" --loss "$LOSS" -- bash "$inner"
  best=$(awk '/^iperf3/{v=$NF; if (v+0>b) b=v+0} END{print b+0}' "$WORK/rows")
  {
    echo "| ${LOSS} loss | Mbit/s | of link | of iperf3 (best) |"
    echo "|---|---:|---:|---:|"
    while read -r line; do
      name=${line% *}; v=${line##* }
      if [ "$v" = failed ]; then echo "| $name | failed | | |"; continue; fi
      python3 -c "import sys; v=float(sys.argv[1]); b=float(sys.argv[2]); print(f'| {sys.argv[3]} | {v:.1f} | {v/$RATE:.2f} | ' + (f'{v/b:.2f}' if b > 0 else '–') + ' |')" "$v" "$best" "$name"
    done < "$WORK/rows"
    echo
  } | tee -a "$RESULT"
done
echo "wrote $RESULT"
