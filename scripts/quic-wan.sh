#!/usr/bin/env bash
# A quick measurement of QUIC vs FTPS (PROT P over TCP) data channels on an
# emulated long path (issue 19), not a benchmark: one run per row, no
# repetitions. Run as root from the repository, after
# `cargo build --release -p ferry -p ferry-wan`:
#
#   scripts/quic-wan.sh 80ms 150mbit 1%            # tcp, quic (bbr), quic (ferry)
#   ROWS="quic:cubic quic:newreno" SIZE=33554432 scripts/quic-wan.sh 80ms 1gbit 1%
#   FERRY=target/debug/ferry FERRY_WAN=target/debug/ferry-wan scripts/quic-wan.sh ...
#
# 150 Mbit/s is what this shared 2-core machine forwards while both ends
# run (docs/udt.md, "Long path").
#
# Prints one line per row: transport, congestion controller, seconds,
# Mbit/s, and the client's user/system CPU seconds. A row that does not
# finish in 90 s says rc=124.
set -u
DELAY=${1:-80ms}; RATE=${2:-1gbit}; LOSS=${3:-0.1%}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
F=${FERRY:-$ROOT/target/release/ferry}; WAN=${FERRY_WAN:-$ROOT/target/release/ferry-wan}
W=$(mktemp -d); trap 'rm -rf "$W" /dev/shm/ferry-quic-wan' EXIT
# A CA and a server certificate for the emulated server address.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $W/ca.key -out $W/ca.pem -days 1 \
  -subj "/CN=quic-wan CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=keyCertSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $W/server.key -out $W/server.csr \
  -subj "/CN=10.77.0.2" 2>/dev/null
printf "subjectAltName=IP:10.77.0.2\nextendedKeyUsage=serverAuth\n" > $W/ext.cnf
openssl x509 -req -in $W/server.csr -CA $W/ca.pem -CAkey $W/ca.key -CAcreateserial -out $W/server.pem -days 1 \
  -extfile $W/ext.cnf 2>/dev/null
mkdir -p /dev/shm/ferry-quic-wan/root
head -c ${SIZE:-134217728} /dev/urandom > /dev/shm/ferry-quic-wan/root/f.bin
echo pw | $F passwd --users $W/users.toml alice --write >/dev/null 2>&1
cat > $W/row.sh <<'ROW'
set -u
t=$1; cc=$2; W=$3; F=$4
S=$FERRY_WAN_SERVER_NS; C=$FERRY_WAN_CLIENT_NS; IP=$FERRY_WAN_SERVER_IP
ip netns exec $S $F serve /dev/shm/ferry-quic-wan/root --users $W/users.toml --listen $IP:2811 \
  --tls-cert $W/server.pem --tls-key $W/server.key ${cc:+--congestion $cc} > /dev/null 2> $W/serve.log &
SP=$!
sleep 1.5
rm -f /dev/shm/ferry-quic-wan/out
start=$(date +%s.%N)
timeout 90 ip netns exec $C /usr/bin/time -f "%U %S" -o $W/time.out $F cp -q --no-resume --mode extended -p ${P:-4} \
  --transport $t ${cc:+--congestion $cc} --ca $W/ca.pem ftps://alice:pw@$IP:2811/f.bin /dev/shm/ferry-quic-wan/out \
  > $W/cp.out 2>&1
rc=$?
end=$(date +%s.%N)
sz=$(stat -c %s /dev/shm/ferry-quic-wan/out 2>/dev/null || echo 0)
echo "transport=$t cc=${cc:-default} p=${P:-4} rc=$rc bytes=$sz secs=$(echo "$end - $start" | bc)" \
  "Mbit/s=$(echo "scale=1; $sz*8/($end - $start)/1000000" | bc) client_cpu_user_sys=$(tail -1 $W/time.out)"
kill $SP
ROW
for row in ${ROWS:-tcp: quic:bbr quic:ferry}; do
  t=${row%%:*}; cc=${row#*:}
  $WAN up --name fqw --delay $DELAY --rate $RATE --loss $LOSS -- bash $W/row.sh "$t" "$cc" $W $F 2>&1 \
    | grep '^transport=' | sed "s|^|delay=$DELAY rate=$RATE loss=$LOSS |"
done
