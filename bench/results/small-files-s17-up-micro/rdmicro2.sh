#!/bin/bash
# Baseline vs after deletes, with the deletes written back (sync after rm) and not.
N=${1:-5000}
B=/var/tmp/s17-up/rd2
mkdir -p $B
mk() {
  python3 - "$1" "$N" <<'PY'
import os,sys,time
d,n=sys.argv[1],int(sys.argv[2]); os.makedirs(d)
t=time.time(); c0=os.times()
for i in range(n):
    fd=os.open(f"{d}/f{i:06d}",os.O_CREAT|os.O_WRONLY|os.O_EXCL,0o644); os.write(fd,b"x"*4096); os.close(fd)
c1=os.times()
print(f"{n} creates: wall {time.time()-t:.3f} s, sys {c1.system-c0.system:.3f} s", flush=True)
PY
}
date -u +%T; echo -n "fresh, no delete (1): "; mk $B/a
echo -n "fresh, no delete (2): "; mk $B/b
sync; rm -rf $B/a $B/b
echo -n "right after deleting 2N (unsynced): "; mk $B/c
sync; rm -rf $B/c; sync
echo -n "right after deleting N, synced: "; mk $B/d
sync; rm -rf $B/d; sync; sleep 65
echo -n "65 s after deleting N, synced: "; mk $B/e
echo -n "fresh, no delete since (3): "; mk $B/f
rm -rf $B/e $B/f; sync
date -u +%T
