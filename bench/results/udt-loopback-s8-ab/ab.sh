#!/usr/bin/env bash
# Loopback A/B of ferry udt copies (1 GiB tmpfs -> /dev/null), old and new interleaved.
# bash udt-lo-ab.sh NEW OLD REPS
NEW=$1 OLD=$2 REPS=${3:-3}
PKI=/tmp/ferry-bench-quic-pki
D=/dev/shm/s8-udt-lo; mkdir -p $D
[ -f $D/f.bin ] || head -c $((1<<30)) /dev/urandom > $D/f.bin
for who in new old; do
  B=$NEW; [ $who = old ] && B=$OLD
  $B serve $D --listen 127.0.0.1:0 --anonymous read --tls-cert $PKI/server.pem --tls-key $PKI/server.key > $D/$who.log 2>&1 &
  echo $! > $D/$who.pid
done
sleep 1
port() { grep -oE "127\.0\.0\.1:[0-9]+" $D/$1.log | head -1 | cut -d: -f2; }
for i in $(seq $REPS); do
  for who in new old; do
    B=$NEW; [ $who = old ] && B=$OLD
    for p in 1 4; do for prot in ftp ftps; do
      s=$(date +%s.%N)
      $B cp --json --no-resume --mode extended -p $p --ca $PKI/ca.pem --transport udt $prot://127.0.0.1:$(port $who)/f.bin /dev/null > /dev/null 2>$D/cp.err || echo "FAIL $who p$p $prot: $(tail -1 $D/cp.err)"
      e=$(date +%s.%N)
      echo "$who -p $p $prot: $(echo "scale=0; 1073741824 / ($e - $s) / 1000000" | bc) MB/s (load $(cut -d' ' -f1 /proc/loadavg))"
    done; done
  done
done
kill $(cat $D/new.pid) $(cat $D/old.pid)
