#!/bin/bash
F=/var/tmp/i18s6/new/ferry; P=/var/tmp/i18s6/prof
rm -rf $P/srv; mkdir -p $P/srv
perf record -e cpu-clock -g -o $P/serve.data $F serve $P/srv --listen 127.0.0.1:2177 --anonymous write > $P/serve.log 2>&1 &
SP=$!; sleep 1
load=$(cut -d' ' -f1 /proc/loadavg)
/usr/bin/time -f "wall %e user %U sys %S" perf record -e cpu-clock -g -o $P/cp.data $F cp --json --no-resume -q -r /var/tmp/sf-s5/data/5000x4KiB/ ftp://anonymous@127.0.0.1:2177/5000x4KiB/ > $P/cp.json 2> $P/cp.err
echo "load1 $load files $(find $P/srv/5000x4KiB -type f | wc -l)"; tail -1 $P/cp.err
kill -INT $SP; wait $SP
