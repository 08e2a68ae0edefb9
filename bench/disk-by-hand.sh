#!/bin/bash
# The by-hand disk-to-disk measurement of docs/data-path.md ("Disk to disk"): one cold-cache
# transfer of a 2 GiB file through `ferry serve` + `ferry cp`, timed until `sync`. Expects
# $B/srv/src2g.bin (downloads) and $B/cli/up2g.bin (uploads); run as root.
# usage: run1.sh FERRY up|down LABEL "cp flags" "serve flags" [perf]
# Times one cold-cache transfer until sync; prints rate, CPU of both ends, /proc io.
set -u
F=$1; DIR=$2; LABEL=$3; CPF=$4; SVF=$5; PERF=${6:-}
B=/var/tmp/ferry-bench/i16
L=$B/logs/$LABEL
rm -f $B/srv/up.bin $B/cli/dl.bin $B/srv/.ferry-partial/* 2>/dev/null
$F serve $B/srv --listen 127.0.0.1:0 --anonymous write $SVF > $L.serve.log 2>&1 &
SP=$!
for i in $(seq 50); do PORT=$(ss -ltnpH | grep "pid=$SP," | awk '{print $4}' | sed 's/.*://' | head -1); [ -n "$PORT" ] && break; sleep 0.1; done
sync; echo 3 > /proc/sys/vm/drop_caches
if [ $DIR = down ]; then SRC=ftp://127.0.0.1:$PORT/src2g.bin; DST=$B/cli/dl.bin; else SRC=$B/cli/up2g.bin; DST=ftp://127.0.0.1:$PORT/up.bin; fi
S0=$(awk '{print $14+$15}' /proc/$SP/stat)
T0=$(date +%s.%N)
if [ -n "$PERF" ]; then
  perf record -q -e cpu-clock -g -o $L.server.perf -p $SP 2>/dev/null & PP=$!
  perf record -q -e cpu-clock -g -o $L.client.perf -- $F cp --json $CPF $SRC $DST > $L.json 2>$L.cp.log
else
  /usr/bin/time -f "%U %S %M" -o $L.time $F cp --json $CPF $SRC $DST > $L.json 2>$L.cp.log
fi
T1=$(date +%s.%N)
sync
T2=$(date +%s.%N)
S1=$(awk '{print $14+$15}' /proc/$SP/stat)
SIO=$(awk '/read_bytes|write_bytes/{printf "%s=%dM ", $1, $2/1048576}' /proc/$SP/io)
SHWM=$(awk '/VmHWM/{print $2/1024}' /proc/$SP/status)
[ -n "$PERF" ] && { kill -INT $PP; wait $PP; }
kill $SP; wait $SP 2>/dev/null
python3 - "$LABEL" $T0 $T1 $T2 $S0 $S1 "$SIO" $SHWM "$L.time" <<'PY'
import sys,os
l,t0,t1,t2,s0,s1,sio,hwm,tf=sys.argv[1:]
t0,t1,t2=float(t0),float(t1),float(t2); G=2147483648/1e9
tick=os.sysconf('SC_CLK_TCK'); scpu=(int(s1)-int(s0))/tick
c=open(tf).read().split() if os.path.exists(tf) else ['0','0','0']
ccpu=float(c[-3])+float(c[-2])
print(f"{l:28s} xfer {t1-t0:6.2f}s  +sync {t2-t0:6.2f}s  {G*1e3/(t2-t0):6.0f} MB/s until sync  cli {ccpu/G:.2f} srv {scpu/G:.2f} CPU-s/GB  cliRSS {int(c[-1])//1024}MiB srvHWM {float(hwm):.0f}MiB  srv {sio}  load {open('/proc/loadavg').read().split()[0]}")
PY
