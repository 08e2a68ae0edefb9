#!/bin/bash
# How long do deleted inodes slow creates nearby? Delete N files (synced), then
# every 20 s create 300 files in a new sibling directory (kept) and time them.
N=${1:-5000}
B=/var/tmp/s17-up/rdw; rm -rf $B; mkdir -p $B; sync; sleep 2
python3 - "$B" "$N" <<'PY'
import os,sys,time,shutil,subprocess
b,n=sys.argv[1],int(sys.argv[2])
def mk(d,k):
    os.makedirs(d); c0=os.times(); t=time.time()
    for i in range(k):
        fd=os.open(f"{d}/f{i:06d}",os.O_CREAT|os.O_WRONLY|os.O_EXCL,0o644); os.write(fd,b"x"*4096); os.close(fd)
    return (os.times().system-c0.system)/k*1e6, (time.time()-t)/k*1e6
print("probe before any delete: sys %.0f us/create, wall %.0f us" % mk(f"{b}/p0",300), flush=True)
mk(f"{b}/old",n); subprocess.run(["sync"]); shutil.rmtree(f"{b}/old"); subprocess.run(["sync"]); t0=time.time()
for j in range(1,21):
    s,w=mk(f"{b}/p{j}",300)
    print(f"{time.time()-t0:5.0f} s after the delete: sys {s:.0f} us/create, wall {w:.0f} us", flush=True)
    time.sleep(20)
PY
rm -rf $B
