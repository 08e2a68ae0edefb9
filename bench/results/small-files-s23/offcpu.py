# offcpu.py PERF SERVER_PID CLIENT_PID: off-CPU time by process and blocking stack from a
# `perf record -e sched:sched_switch -a -g` (offcpu.sh). A thread's off-CPU interval runs from its
# switch-out (the stack says what it blocked in, the state R/S/D how) to its next switch-in.
import sys, re, collections, subprocess
perf, spid, cpid = sys.argv[1], sys.argv[2], sys.argv[3]
out = subprocess.run(["perf","script","-i",perf,"-F","comm,pid,tid,cpu,time,trace,ip,sym"],capture_output=True,text=True).stdout
ev = []
cur = None
for line in out.split("\n"):
    if not line.strip():
        if cur: ev.append(cur); cur=None
        continue
    if not line.startswith(("\t"," ")) or "prev_pid=" in line:
        m = re.search(r"(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):.*prev_pid=(\d+).*prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)", line)
        if m:
            cur = dict(pid=m.group(1), tid=m.group(2), cpu=int(m.group(3)), t=float(m.group(4)), prev=m.group(5), state=m.group(6), next=m.group(8), stack=[])
        continue
    if cur is not None:
        parts = line.split()
        if len(parts) >= 2: cur["stack"].append(parts[1].split("+")[0])
if cur: ev.append(cur)
ev.sort(key=lambda e: e["t"])
t0, t1 = ev[0]["t"], ev[-1]["t"]
# who owns each tid
owner = {}
for e in ev:
    if e["pid"] in (spid, cpid): owner[e["prev"]] = "server" if e["pid"]==spid else "client"
out_at = {}
agg = collections.Counter(); cnt = collections.Counter()
idle = collections.Counter(); idle_since = {}
oncpu = collections.Counter(); in_at = {}
def sig(st):
    sysc = next((f for f in st if f.startswith("__x64_sys_") or f.startswith("__do_sys")), "-")
    ker = [f for f in st if not f.startswith(("__schedule","schedule","__x64","do_syscall","entry_SYSCALL")) and not f.startswith("[")][:3]
    user = [f for f in st if f!="[unknown]" and not f.startswith(("__","schedule","do_","entry_","x64","ret_from","asm_","irqentry"))]
    return sysc + " | " + ",".join(ker)
for e in ev:
    p, n, t = e["prev"], e["next"], e["t"]
    if p == "0": 
        if e["cpu"] in idle_since: idle[e["cpu"]] += t - idle_since.pop(e["cpu"])
    if n == "0": idle_since[e["cpu"]] = t
    if p in owner:
        out_at[p] = (t, e["state"], sig(e["stack"]))
        if p in in_at: oncpu[owner[p]] += t - in_at.pop(p)
    if n in owner:
        in_at[n] = t
        if n in out_at:
            to, st, s = out_at.pop(n)
            agg[(owner[n], st, s)] += t - to; cnt[(owner[n], st, s)] += 1
# The copy's own window: from the client's first switch to its last.
ct = [e["t"] for e in ev if e["pid"] == cpid]
w0, w1 = (min(ct), max(ct)) if ct else (t0, t1)
busy = collections.Counter()
last_t, last_next = {}, {}
for e in ev:
    c = e["cpu"]
    if c in last_t:
        a, b = max(last_t[c], w0), min(e["t"], w1)
        if b > a:
            busy["idle" if last_next[c] == "0" else "busy"] += b - a
            busy[("idle" if last_next[c] == "0" else "busy", c)] += b - a
    last_t[c], last_next[c] = e["t"], e["next"]
print(f"copy window {w1-w0:.3f} s: per CPU idle " + ", ".join(f"cpu{c} {busy[('idle', c)]:.3f} s" for c in sorted({e['cpu'] for e in ev})))
print(f"window {t1-t0:.3f} s; idle per cpu {dict((k, round(v,3)) for k,v in idle.items())}; on-cpu {dict((k, round(v,3)) for k,v in oncpu.items())}")
print("threads:", collections.Counter(owner.values()))
for k, v in sorted(agg.items(), key=lambda kv: -kv[1])[:30]:
    print(f"{v*1000:8.1f} ms {cnt[k]:6d}x  {k[0]:6s} {k[1]:2s} {k[2]}")
