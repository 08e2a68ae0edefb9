#!/bin/bash
# strace -c of the server for one upload of the 256k tree (2000 files). Usage: stc.sh BINARY OUT
F=$1; OUT=$2; W=/var/tmp/s17-up/ab/256k; root=$W/roots/strace-$(basename $OUT); mkdir -p $root
PORT=$((20000 + RANDOM % 20000))
strace -c -f -o $OUT $F serve $root --listen 127.0.0.1:$PORT --anonymous write >/dev/null 2>&1 & SP=$!
sleep 1.5
$F cp -r -q $W/src/ ftp://anonymous@127.0.0.1:$PORT/up/ >/dev/null 2>&1; echo rc=$?
pkill -INT -P $SP -x ferry 2>/dev/null; sleep 0.3; kill $(pgrep -P $SP) 2>/dev/null; wait $SP
