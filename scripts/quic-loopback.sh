#!/usr/bin/env bash
# Loopback, memory to memory (issue 19): Ferry's data-channel transports
# side by side in one run — TCP in clear, FTPS (PROT P over TCP), QUIC,
# UDT in clear and UDT under PROT P (`udtp`: AES-GCM records) — with 1 and 4 streams: throughput and CPU seconds per
# GB at both ends. A measurement script, not the ferry-bench scenario.
#
#   scripts/quic-loopback.sh                      # 1 GiB per row
#   SIZE=4294967296 ROWS="ftps:4 quic:4" scripts/quic-loopback.sh
#   FERRY=target/debug/ferry scripts/quic-loopback.sh
#
# The server serves its virtual /dev/zero (--memory-paths) and the client
# writes to /dev/null. One fresh server per row; its CPU is read from
# /proc/PID/stat just before it is stopped, the client's with
# /usr/bin/time. Prints one line per row, then the load average.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
F=${FERRY:-$ROOT/target/release/ferry}
SIZE=${SIZE:-1073741824}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $W/ca.key -out $W/ca.pem -days 1 \
  -subj "/CN=quic-loopback CA" -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=keyCertSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout $W/server.key -out $W/server.csr \
  -subj "/CN=127.0.0.1" 2>/dev/null
printf "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n" > $W/ext.cnf
openssl x509 -req -in $W/server.csr -CA $W/ca.pem -CAkey $W/ca.key -CAcreateserial -out $W/server.pem -days 1 \
  -extfile $W/ext.cnf 2>/dev/null
mkdir -p $W/root
echo pw | $F passwd --users $W/users.toml alice --write >/dev/null 2>&1
TICK=$(getconf CLK_TCK)
cpu_of() { awk -v t=$TICK '{printf "%.2f", ($14+$15)/t}' /proc/$1/stat; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for row in ${ROWS:-tcp:1 ftps:1 quic:1 udt:1 tcp:4 ftps:4 quic:4 udt:4}; do
  t=${row%%:*}; p=${row#*:}
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  $F serve $W/root --users $W/users.toml --listen 127.0.0.1:$PORT --tls-cert $W/server.pem --tls-key $W/server.key \
    --memory-paths --memory-zero-size $SIZE > /dev/null 2> $W/serve.log &
  SP=$!
  sleep 1
  case $t in
    tcp) url="ftp://alice:pw@127.0.0.1:$PORT/dev/zero"; extra=() ;;
    ftps) url="ftps://alice:pw@127.0.0.1:$PORT/dev/zero"; extra=(--ca $W/ca.pem) ;;
    quic) url="ftps://alice:pw@127.0.0.1:$PORT/dev/zero"; extra=(--ca $W/ca.pem --transport quic) ;;
    udt) url="ftp://alice:pw@127.0.0.1:$PORT/dev/zero"; extra=(--transport udt) ;;
    udtp) url="ftps://alice:pw@127.0.0.1:$PORT/dev/zero"; extra=(--ca $W/ca.pem --transport udt) ;; # PROT P: AES-GCM records
  esac
  timeout 300 /usr/bin/time -f "%e %U %S" -o $W/time.out $F cp --json --no-resume --retries 0 --mode extended -p $p \
    "${extra[@]}" "$url" /dev/null > $W/cp.json 2> $W/cp.err
  rc=$?
  scpu=$(cpu_of $SP)
  kill $SP; wait $SP 2>/dev/null
  read secs cu cs < <(tail -1 $W/time.out)
  used=$(grep -o '"transport":"[a-z]*"' $W/cp.json | head -1 | cut -d'"' -f4)
  gb=$(echo "scale=6; $SIZE/1000000000" | bc)
  echo "row=$t p=$p used=${used:-?} rc=$rc bytes=$SIZE secs=$secs" \
    "Gbit/s=$(echo "scale=2; $SIZE*8/$secs/1000000000" | bc)" \
    "client_cpu_s=$(echo "$cu + $cs" | bc) server_cpu_s=$scpu" \
    "client_cpu_s_per_GB=$(echo "scale=2; ($cu + $cs)/$gb" | bc) server_cpu_s_per_GB=$(echo "scale=2; $scpu/$gb" | bc)"
  [ $rc -ne 0 ] && tail -3 $W/cp.err
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
