#!/usr/bin/env bash
# Development measurement of the UDT driver on loopback, memory to memory:
# Ferry <-> Ferry, Ferry <-> libudt, libudt <-> libudt (the anchor, built from
# crates/io/tests/udt/peer.cpp). Prints one Markdown row per run: MB/s and CPU
# seconds per GB of each end. Usage: bench/udt-loopback.sh [BYTES] [REPS]
set -uo pipefail
cd "$(dirname "$0")/.."
BYTES=${1:-400000000}
REPS=${2:-3}
cargo build --release -q -p ferry-io --example udt_perf
FERRY=target/release/examples/udt_perf
PEER=$(mktemp -d)/udt-peer
g++ -O2 -o "$PEER" crates/io/tests/udt/peer.cpp -ludt -lpthread
out=$(mktemp)
# server_cmd... -- client_cmd...; the server prints "PORT n" then both print "OK bytes secs cpu ..."
run() {
  local name=$1 server=$2 client=$3
  : > "$out"
  timeout 120 $server > "$out" 2>/dev/null &
  local spid=$!
  for _ in $(seq 50); do grep -q PORT "$out" && break; sleep 0.1; done
  local port; port=$(awk '/PORT/{print $2}' "$out")
  local c; c=$(timeout 120 ${client//PORT/$port} 2>/dev/null | grep '^OK')
  wait $spid
  local s; s=$(grep '^OK' "$out")
  if [ -z "$c" ] || [ -z "$s" ]; then echo "| $name | failed | | |"; return; fi
  read -r _ cb csec ccpu _ <<< "$c"
  read -r _ sb ssec scpu _ <<< "$s"
  local secs; secs=$(python3 -c "print(max($csec,$ssec))")
  python3 -c "b=$cb; s=$secs; print(f'| $name | {b/s/1e6:.0f} | {$ccpu/(b/1e9):.2f} | {$scpu/(b/1e9):.2f} |')"
}
echo "| sender → receiver | MB/s | client CPU s/GB | server CPU s/GB |"
echo "|---|---:|---:|---:|"
for _ in $(seq "$REPS"); do
  run "libudt → libudt" "$PEER server 0 sink $BYTES" "$PEER client 127.0.0.1 PORT send $BYTES"
  run "ferry → ferry (ferry cc)" "$FERRY server 127.0.0.1:0 recv $BYTES" "$FERRY client 127.0.0.1:PORT send $BYTES"
  run "ferry → ferry (udt cc)" "$FERRY server 127.0.0.1:0 recv $BYTES --cc udt" "$FERRY client 127.0.0.1:PORT send $BYTES --cc udt"
  run "ferry → ferry (ferry cc, MSS 9000)" "$FERRY server 127.0.0.1:0 recv $BYTES --mss 9000" "$FERRY client 127.0.0.1:PORT send $BYTES --mss 9000"
  run "ferry → libudt" "$PEER server 0 sink $BYTES" "$FERRY client 127.0.0.1:PORT send $BYTES"
  run "libudt → ferry" "$PEER server 0 send $BYTES" "$FERRY client 127.0.0.1:PORT recv $BYTES"
done
