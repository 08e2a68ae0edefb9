#!/usr/bin/env bash
# One mixed-tree upload with the server's info log (timeline of lines, transfers, passes).
set -euo pipefail
F=${F:-/var/tmp/lead/s27/bin/ferry-overlap}
SRC=/var/tmp/lead/s19/pairs-mixed/src
O=/var/tmp/lead/s27/tl/$(date +%H%M%S); mkdir -p $O/root
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
FERRY_LOG=${LOGSPEC:-info} $F serve $O/root --listen 127.0.0.1:$port --anonymous write > /dev/null 2> $O/serve.log &
spid=$!
sleep 1
cat $SRC/* > /dev/null
/usr/bin/time -f "wall %e s client user %U sys %S" $F cp --json -q -r $SRC/ ftp://127.0.0.1:$port/t/ > $O/tree.json 2>> $O/times.txt
kill $spid
cat $O/times.txt
echo $O
