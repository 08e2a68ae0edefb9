#!/usr/bin/env bash
# Development measurement of UDT on one emulated long path (ferry-wan):
# default 1 Gbit/s, 80 ms one way, 1 % random loss each way, MTU 9000.
# Rows: Ferry's default controller (cold start, and started at the link rate
# as a path probe would), UDT's DAIMD in Ferry, libudt <-> libudt (the
# anchor, crates/io/tests/udt/peer.cpp, MSS 9000). Each sender runs for
# SECS seconds (libudt: a fixed byte count, timed); rate = bytes received
# / receiver's elapsed time, start-up included.
#   bench/udt-wan.sh [SECS] [DELAY_MS] [RATE_MBIT] [LOSS]
set -uo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
DELAY=${2:-80}
RATE=${3:-1000}
LOSS=${4:-1%}
cargo build --release -q -p ferry-io --example udt_perf
cargo build --release -q -p ferry-wan
FERRY=$PWD/target/release/examples/udt_perf
PEER=$(mktemp -d)/udt-peer
g++ -O2 -o "$PEER" crates/io/tests/udt/peer.cpp -ludt -lpthread
NAME=udtw$$
RTT=$((2 * DELAY))
inner=$(mktemp)
cat > "$inner" <<INNER
set -u
out=\$(mktemp)
row() {
  local name=\$1 server=\$2 client=\$3
  : > "\$out"
  timeout \$((SECS + 120)) ip netns exec \$FERRY_WAN_SERVER_NS \$server > "\$out" 2>/dev/null &
  local spid=\$!
  for _ in \$(seq 50); do grep -q PORT "\$out" && break; sleep 0.1; done
  local port; port=\$(awk '/PORT/{print \$2}' "\$out")
  timeout \$((SECS + 120)) ip netns exec \$FERRY_WAN_CLIENT_NS \${client//PORT/\$port} > /dev/null 2>&1
  wait \$spid
  local s; s=\$(grep '^OK' "\$out")
  if [ -z "\$s" ]; then echo "| \$name | failed | |"; return; fi
  read -r _ b secs cpu _ <<< "\$s"
  python3 -c "print(f'| \$name | {\$b*8/\$secs/1e6:.0f} | {\$b*8/\$secs/1e6/$RATE:.2f} |')"
}
echo "| ${RATE} Mbit/s, ${DELAY} ms one way, ${LOSS} loss | Mbit/s (payload) | of link |"
echo "|---|---:|---:|"
S=\$FERRY_WAN_SERVER_IP
P="--mss 9000 --rtt-ms $RTT --rate-mbit $RATE"
row "Ferry, ferry cc" "$FERRY server \$S:0 recv 1000000000000 \$P" "$FERRY client \$S:PORT send 1000000000000 --seconds $SECS \$P"
row "Ferry, ferry cc started at the link rate" "$FERRY server \$S:0 recv 1000000000000 \$P" "$FERRY client \$S:PORT send 1000000000000 --seconds $SECS \$P --start-mbit $RATE"
row "Ferry, udt cc (DAIMD)" "$FERRY server \$S:0 recv 1000000000000 \$P --cc udt" "$FERRY client \$S:PORT send 1000000000000 --seconds $SECS \$P --cc udt"
row "libudt 4.11 ↔ libudt 4.11" "env UDT_PEER_BIND=\$S $PEER server 0 sink 400000000 9000" "$PEER client \$S PORT send 400000000 9000"
INNER
SECS=$SECS target/release/ferry-wan up --name "$NAME" --delay "${DELAY}ms" --rate "${RATE}mbit" --loss "$LOSS" -- env SECS="$SECS" bash "$inner"
