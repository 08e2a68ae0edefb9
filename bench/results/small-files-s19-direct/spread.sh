#!/bin/bash
# The 256 KiB upload's spread: ROUNDS uploads of the same 2,000 x 256 KiB tree
# (and, alternating, the same bytes as one file) by one build into fresh
# directories of one server; nothing deleted until the end. Per round: wall,
# server and client CPU (user/sys), the dirty and writeback pages before,
# the device's writes during (from /proc/diskstats), ferry's JSON timings.
# Usage: spread.sh FERRY ROUNDS OUT [perf]
set -u
F=$1; R=$2; OUT=$3; PERF=${4:-}
W=${WORK:-/var/tmp/lead/s19}/spread; mkdir -p $W/src $W/one $W/root
[ -f $W/src/.made ] || python3 - "$W/src" "$W/one" <<'PY'
import os,sys
top,one=sys.argv[1],sys.argv[2]
buf=os.urandom(262144*2000)
for i in range(2000):
    with open(f"{top}/f{i:05}","wb") as f: f.write(buf[i*262144:(i+1)*262144])
with open(f"{one}/all","wb") as f: f.write(buf)
open(f"{top}/.made","w").close()
PY
cat $W/src/* $W/one/all > /dev/null
sync
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$F serve $W/root --listen 127.0.0.1:$PORT --anonymous write >$OUT.serve.log 2>&1 & SPID=$!
sleep 1
dsk() { awk '$3=="vda"{print $10*512/1e6, $11}' /proc/diskstats; }
vm() { awk '/^nr_dirty |^nr_writeback /{printf "%s=%d ", $1, $2*4/1024}' /proc/vmstat; }
cpu() { awk '{printf "%.2f %.2f", $14/100, $15/100}' /proc/$1/stat; }
for r in $(seq 1 $R); do
  for kind in tree one; do
    src=$W/src/; [ $kind = one ] && src=$W/one/
    sleep 3
    v0=$(vm); d0=($(dsk)); c0=($(cpu $SPID)); l=$(cut -d' ' -f1 /proc/loadavg)
    [ -n "$PERF" ] && { perf record -e cpu-clock -F 999 -g -p $SPID -o $OUT.$kind.$r.perf >/dev/null 2>&1 & PP=$!; sleep 0.3; }
    t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S" -o $OUT.time $F cp --json --no-resume -q -r $src ftp://127.0.0.1:$PORT/$kind-$r/ > $OUT.$kind.$r.json 2>$OUT.err; rc=$?
    t1=$(date +%s.%N)
    [ -n "$PERF" ] && { kill -INT $PP; wait $PP; }
    c1=($(cpu $SPID)); d1=($(dsk))
    printf "%s %2d rc %d wall %.3f srv-cpu u %.2f s %.2f cli-cpu %s disk-MB %.0f load %s before: %s json: %s\n" $kind $r $rc $(echo "$t1-$t0"|bc) \
      $(echo "${c1[0]}-${c0[0]}"|bc) $(echo "${c1[1]}-${c0[1]}"|bc) "$(cat $OUT.time)" $(echo "${d1[0]}-${d0[0]}"|bc) $l "$v0" \
      "$(python3 -c 'import json,sys;d=json.load(open(sys.argv[1]));print({k:d[k] for k in d if k in ("seconds","sync_seconds","concurrency","files")})' $OUT.$kind.$r.json 2>/dev/null)" | tee -a $OUT
  done
done
kill $SPID; wait $SPID 2>/dev/null
