#!/bin/bash
# Does deleting a tree seconds before make the next tree's creates slower (ext4 without a journal)?
# Usage: rdmicro.sh N ; creates N files in a fresh dir after deleting N files, at several delays.
set -e
N=${1:-5000}
B=/var/tmp/s17-up/rd
mkdir -p $B
mk() { # dir
  local d=$1; mkdir -p $d
  python3 - "$d" "$N" <<'PY'
import os,sys,time
d,n=sys.argv[1],int(sys.argv[2])
t=time.time(); c0=os.times()
for i in range(n):
    fd=os.open(f"{d}/f{i:06d}",os.O_CREAT|os.O_WRONLY|os.O_EXCL,0o644); os.write(fd,b"x"*4096); os.close(fd)
c1=os.times()
print(f"{n} creates: wall {time.time()-t:.3f} s, sys {c1.system-c0.system:.3f} s")
PY
}
for delay in 0 10 40 70 100; do
  rm -rf $B/*; sync; sleep 2
  mk $B/old >/dev/null; sync
  rm -rf $B/old; 
  sleep $delay
  echo -n "delete then wait ${delay}s: "; mk $B/new$delay
  rm -rf $B/new$delay
done
rm -rf $B
