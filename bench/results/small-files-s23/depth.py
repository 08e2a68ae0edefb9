# depth.py PERF SERVER_PID CLIENT_PID: from offcpu.sh's sched_switch record, how many of the server's direct
# pwrites were in flight over the copy's window (a server thread switched out in pwrite64 in state D, until it
# runs again): the share of time at each depth and the mean depth in 20-ms bins.
import sys, re, collections, subprocess
perf, spid, cpid = sys.argv[1:4]
out = subprocess.run(["perf","script","-i",perf,"-F","pid,tid,cpu,time,trace,ip,sym"],capture_output=True,text=True).stdout
ev=[]; cur=None
for line in out.split("\n"):
    m = re.search(r"(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):.*prev_pid=(\d+).*prev_state=(\S+) ==> .*next_pid=(\d+)", line)
    if m:
        cur=dict(pid=m.group(1),t=float(m.group(4)),prev=m.group(5),state=m.group(6),next=m.group(7),pw=False); ev.append(cur); continue
    if cur is not None and "__x64_sys_pwrite64" in line: cur["pw"]=True
ev.sort(key=lambda e:e["t"])
ct=[e["t"] for e in ev if e["pid"]==cpid]; w0,w1=min(ct),max(ct)
inflight=set(); depth_time=collections.Counter(); last=w0; tl=collections.defaultdict(float)
def acc(t):
    global last
    a,b=max(last,w0),min(t,w1)
    if b>a:
        depth_time[len(inflight)]+=b-a
        # timeline in 20 ms bins
        x=a
        while x<b:
            nb=min(b,(int((x-w0)/0.02)+1)*0.02+w0)
            if nb<=x: nb=min(b,x+1e-6)
            tl[int((x-w0)/0.02)]+=len(inflight)*(nb-x); x=nb
    last=t
for e in ev:
    acc(e["t"])
    if e["next"] in inflight: inflight.discard(e["next"])
    if e["pid"]==spid and e["pw"] and e["state"].startswith("D"): inflight.add(e["prev"])
tot=sum(depth_time.values())
print(f"window {w1-w0:.3f} s; mean depth {sum(k*v for k,v in depth_time.items())/tot:.1f}")
for k in sorted(depth_time): print(f"depth {k:2d}: {depth_time[k]/tot*100:5.1f} %")
print("20-ms bins, mean depth:", " ".join(f"{tl[i]/0.02:.0f}" for i in range(int((w1-w0)/0.02)+1)))
