#!/usr/bin/env python3
"""Paired upload rounds on loopback: every round runs each row once, in an
order rotated round by round, into fresh directories (nothing deleted until
the end). Rows: ferry tree (NEW), ferry tree (OLD, optional), globus -cc 8
tree, the tree's bytes as one file (NEW). Prints per-round walls and the
per-round ratios, then medians. Also the server CPU of each Ferry row.
usage: pairs.py ROUNDS OUT NEW [OLD] [--tree 256k|4k|mixed] [--no-globus]"""
import os, sys, time, json, subprocess, socket, statistics, argparse, shutil
ap = argparse.ArgumentParser()
ap.add_argument("rounds", type=int); ap.add_argument("out"); ap.add_argument("new"); ap.add_argument("old", nargs="?")
ap.add_argument("--tree", default="256k", choices=["256k", "4k", "mixed"]); ap.add_argument("--no-globus", action="store_true")
ap.add_argument("--gap", type=float, default=2.0)
a = ap.parse_args()
WORK = os.environ.get("WORK", "/var/tmp/lead/s19")
W = f"{WORK}/pairs-{a.tree}"
src, one = f"{W}/src", f"{W}/one"
os.makedirs(src, exist_ok=True); os.makedirs(one, exist_ok=True)
if not os.path.exists(f"{src}/.made"):
    if a.tree == "256k": sizes = [262144] * 2000
    elif a.tree == "4k": sizes = [4096] * 20000
    else:
        n = 1000; w = [1 / k for k in range(1, n + 1)]; s = sum(w); sc = 1_000_000 * n / s
        sizes = [max(1, round(x * sc)) for x in w]
    buf = os.urandom(sum(sizes)); off = 0
    for i, b in enumerate(sizes):
        with open(f"{src}/f{i:05}", "wb") as f: f.write(buf[off:off + b])
        off += b
    with open(f"{one}/all", "wb") as f: f.write(buf)
    open(f"{src}/.made", "w").close()
for d in (src, one):
    for n in os.listdir(d):
        with open(f"{d}/{n}", "rb") as f:
            while f.read(1 << 20): pass
STAMP = f"{WORK}/.deleted"
# ext4 without a journal will not reuse an inode freed in the last 60 s, or
# 360 s while its inode-table block is still dirty (ialloc.c,
# recently_deleted): creates after a delete scan past them (session 22 saw
# 80 % of a profile's create time there 90 s after a delete).
if os.path.exists(STAMP):
    left = 370 - (time.time() - os.path.getmtime(STAMP))
    if left > 0: print(f"waiting {left:.0f} s after the last deletes"); time.sleep(left)
run_id = time.strftime("%H%M%S")
root = f"{W}/root-{run_id}"; groot = f"{W}/groot-{run_id}"
os.makedirs(root); os.makedirs(groot); os.chmod(groot, 0o777)
def port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p
def wait_port(p):
    for _ in range(200):
        try: socket.create_connection(("127.0.0.1", p), 0.2).close(); return
        except OSError: time.sleep(0.05)
    raise SystemExit(f"no server on {p}")
procs = {}; ports = {}
for tag, binary in (("new", a.new), ("old", a.old)):
    if not binary: continue
    p = port(); ports[tag] = p
    procs[tag] = subprocess.Popen([binary, "serve", root, "--listen", f"127.0.0.1:{p}", "--anonymous", "write"],
                                  stdout=subprocess.DEVNULL, stderr=open(f"{a.out}.{tag}.serve.log", "w"))
    wait_port(p)
if not a.no_globus:
    gp = port(); ports["globus"] = gp
    procs["globus"] = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server",
        "-c", "/dev/null", "-aa", "-p", str(gp), "-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_port(gp)
def cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / 100
rows = ["ferry"] + (["old"] if a.old else []) + ([] if a.no_globus else ["globus"]) + ["one"]
res = {r: [] for r in rows}; cpus = {r: [] for r in rows}
log = open(a.out, "a")
def say(s):
    print(s); log.write(s + "\n"); log.flush()
say(f"# pairs.py {' '.join(sys.argv[1:])} at {time.strftime('%F %T')}, tree {a.tree}, rows {rows}")
for r in range(a.rounds):
    order = rows[r % len(rows):] + rows[:r % len(rows)]
    line = []
    for row in order:
        # The row's source, read untimed: this machine's DAMON pages out
        # page cache it sees idle, so the tree read at the start was 83 %
        # resident 80 s later (session 24).
        s = one if row == "one" else src
        for n in os.listdir(s):
            with open(f"{s}/{n}", "rb") as f:
                while f.read(1 << 20): pass
        time.sleep(a.gap)
        os.sync()
        if row == "globus":
            cmd = ["globus-url-copy", "-r", "-cd", "-pp", "-cc", "8", f"file://{src}/", f"ftp://127.0.0.1:{ports['globus']}{groot}/g{r}/"]
            pid = None
        else:
            b, tag = (a.old, "old") if row == "old" else (a.new, "new")
            s = one if row == "one" else src
            cmd = [b, "cp", "--json", "--no-resume", "-q", "-r", f"{s}/", f"ftp://127.0.0.1:{ports[tag]}/{row}-{r}/"]
            pid = procs[tag].pid
        c0 = cpu(pid) if pid else 0
        t0 = time.time()
        rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE).returncode
        t = time.time() - t0
        c = (cpu(pid) - c0) if pid else 0
        if rc != 0: say(f"round {r} {row} FAILED rc {rc}")
        res[row].append(t); cpus[row].append(c)
        # Frees the blocks, keeps the inodes (ext4 without a journal skips
        # inodes freed in the last ~60 s: deletes wait for the end).
        dst = f"{groot}/g{r}" if row == "globus" else f"{root}/{row}-{r}"
        for dp, _, fs in os.walk(dst):
            for fn in fs: os.truncate(os.path.join(dp, fn), 0)
        line.append(f"{row} {t:.3f}s" + (f" (srv cpu {c:.2f})" if pid else ""))
    f = res["ferry"][-1]
    rat = [f"ferry÷one {res['one'][-1] / f:.2f}"]
    if "globus" in res: rat.append(f"ferry÷globus {res['globus'][-1] / f:.2f}")
    if "old" in res: rat.append(f"new÷old {res['old'][-1] / f:.2f}")
    say(f"round {r:2}: " + ", ".join(line) + " | " + ", ".join(rat) + f" | load {os.getloadavg()[0]:.2f}")
def med(xs): return statistics.median(xs)
per = lambda other: [o / f for o, f in zip(res[other], res["ferry"])]
summary = {"rounds": a.rounds, "tree": a.tree,
           "median wall": {k: round(med(v), 3) for k, v in res.items()},
           "median files/s ferry": round({"256k": 2000, "4k": 20000, "mixed": 1000}[a.tree] / med(res["ferry"]), 1),
           "median per-round ferry÷one": round(med(per("one")), 3)}
if "globus" in res: summary["median per-round ferry÷globus"] = round(med(per("globus")), 3)
if "old" in res: summary["median per-round new÷old"] = round(med(per("old")), 3)
summary["per-round ferry÷one"] = [round(x, 2) for x in per("one")]
if "globus" in res: summary["per-round ferry÷globus"] = [round(x, 2) for x in per("globus")]
if "old" in res: summary["per-round new÷old"] = [round(x, 2) for x in per("old")]
summary["median server cpu"] = {k: round(med(v), 3) for k, v in cpus.items() if k != "globus"}
say(json.dumps(summary))
for p in procs.values(): p.terminate()
for p in procs.values(): p.wait()
# KEEP=1 keeps the (truncated) roots, so that the next run need not wait
# out the deletes' window; delete them, and stamp, when the series ends.
if os.environ.get("KEEP"):
    print(f"kept {root} {groot}")
else:
    shutil.rmtree(root, ignore_errors=True); shutil.rmtree(groot, ignore_errors=True)
    open(STAMP, "w").close()
