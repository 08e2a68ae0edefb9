#!/bin/bash
# usage: cpu.sh F SRCDIR NAME : one upload with whole-machine CPU split (from /proc/stat)
. "$(dirname "$(readlink -f "$0")")/../small-files-s20/lib.sh"  # port, serve, warm (and waits out recent deletes)
F=$1; S=$2; N=$3
O=/var/tmp/lead/s19/pairs-mixed/cpu-root; mkdir -p $O
serve $F $O
warm $S; sync; sleep 1
a=($(head -1 /proc/stat)); t0=$(date +%s.%N)
$F cp --json --no-resume -q -r $S/ ftp://127.0.0.1:$PORT/$N/ >/dev/null
t1=$(date +%s.%N); b=($(head -1 /proc/stat))
kill $SPID
python3 - "$t0" "$t1" "${a[@]:1}" -- "${b[@]:1}" <<'PY'
import sys
t0,t1=float(sys.argv[1]),float(sys.argv[2]); r=sys.argv[3:]; i=r.index('--'); a=list(map(int,r[:i])); b=list(map(int,r[i+1:]))
d=[y-x for x,y in zip(a,b)]; names=['user','nice','system','idle','iowait','irq','softirq','steal']
tot=sum(d[:8]); print(f"wall {t1-t0:.2f}s  "+"  ".join(f"{n} {100*v/tot:.0f}%" for n,v in zip(names,d[:8])))
PY
find $O -type f -exec truncate -s 0 {} +
