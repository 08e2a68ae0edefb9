#!/bin/bash
# run.sh FERRY CC PORT OUTDIR : one 1 GiB loopback download over UDT with traces at both ends
F=$1; CC=$2; PORT=$3; OUT=$4
mkdir -p $OUT; rm -f $OUT/*.jsonl
FERRY_UDT_TRACE=$OUT $F serve /dev/shm/s11-drv-v/src --listen 127.0.0.1:$PORT --anonymous read --congestion $CC > $OUT/server.log 2>&1 &
SP=$!
sleep 1
s=$(date +%s.%N)
FERRY_UDT_TRACE=$OUT /usr/bin/time -f "%e s %U user %S sys" $F cp --json --transport udt --congestion $CC ftp://127.0.0.1:$PORT/data.bin /dev/null > $OUT/cp.json 2> $OUT/cp.err
e=$(date +%s.%N)
kill $SP; wait $SP 2>/dev/null
echo "$F $CC: $(echo "8*1073741824/($e-$s)/1e6" | bc -l | cut -c1-7) Mbit/s wall; $(tail -1 $OUT/cp.err)"
