#!/bin/bash
# loopback upload of 5000x4KiB into tmpfs; perf of server and client; strace -c per side
F=${F:-/var/tmp/old-s7/ferry}; SRC=/var/tmp/sf-s7/data/5000x4KiB; ROOT=/dev/shm/i18s7-up
rm -rf $ROOT; mkdir -p $ROOT
$F serve $ROOT --listen 127.0.0.1:0 --anonymous write > serve.out 2> serve.err &
SP=$!; sleep 0.5
PORT=$(grep -o '127.0.0.1:[0-9]*' serve.out | head -1 | cut -d: -f2)
if [ "$MODE" = strace ]; then
  strace -c -f -o strace-server.txt -p $SP &
  TP=$!; sleep 0.3
  strace -c -f -o strace-client.txt $F cp --json --no-resume -q -r $SRC/ ftp://anonymous@127.0.0.1:$PORT/t/ > cp.json
  kill -INT $TP; sleep 0.5
else
  perf record -e cpu-clock -g -o server.data -p $SP 2> /dev/null &
  PP=$!; sleep 0.3
  perf record -e cpu-clock -g -o client.data -- $F cp --json --no-resume -q -r $SRC/ ftp://anonymous@127.0.0.1:$PORT/t/ > cp.json 2>/dev/null
  kill -INT $PP; sleep 1
fi
python3 -c "import json;d=json.load(open('cp.json'));print('files',d['files'],'s %.2f'%d['seconds'])"
kill $SP
