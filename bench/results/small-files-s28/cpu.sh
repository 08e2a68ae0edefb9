#!/bin/bash
# usage: cpu.sh F SRCDIR NAME : one upload with whole-machine CPU split (from /proc/stat)
F=$1; S=$2; N=$3
O=/var/tmp/lead/s19/pairs-mixed/cpu-root; mkdir -p $O
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$F serve $O --listen 127.0.0.1:$port --anonymous write >/dev/null 2>&1 & spid=$!
sleep 1; cat $S/* >/dev/null; sync; sleep 1
a=($(head -1 /proc/stat)); t0=$(date +%s.%N)
$F cp --json --no-resume -q -r $S/ ftp://127.0.0.1:$port/$N/ >/dev/null
t1=$(date +%s.%N); b=($(head -1 /proc/stat))
kill $spid
python3 - "$t0" "$t1" "${a[@]:1}" -- "${b[@]:1}" <<'PY'
import sys
t0,t1=float(sys.argv[1]),float(sys.argv[2]); r=sys.argv[3:]; i=r.index('--'); a=list(map(int,r[:i])); b=list(map(int,r[i+1:]))
d=[y-x for x,y in zip(a,b)]; names=['user','nice','system','idle','iowait','irq','softirq','steal']
tot=sum(d[:8]); print(f"wall {t1-t0:.2f}s  "+"  ".join(f"{n} {100*v/tot:.0f}%" for n,v in zip(names,d[:8])))
PY
find $O -type f -exec truncate -s 0 {} +
