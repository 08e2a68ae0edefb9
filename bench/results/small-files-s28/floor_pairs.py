#!/usr/bin/env python3
"""Paired rounds on loopback, each row once per round in a rotated order:
Ferry's upload of the mixed tree (1,000 Zipf files, 1,000 MB), Ferry's
upload of the same bytes as one file, and the device's floors without a
network or a server (8 Python threads writing the same files from memory,
each made durable): the tree with one syncfs at its end, the tree with a
syncfs after every 32 files per thread (as Ferry's passes), and one file
with an fsync. Outputs are truncated after each row (not deleted: ext4
scans past recently freed inodes on the next creates).
usage: floor_pairs.py FERRY ROUNDS OUT"""
import os, sys, time, json, socket, subprocess, threading, ctypes, statistics
libc = ctypes.CDLL("libc.so.6", use_errno=True)
F, R, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
W = "/var/tmp/lead/s19/pairs-mixed"
src, onesrc = f"{W}/src", f"{W}/one"
D = f"{W}/floor-{time.strftime('%H%M%S')}"
os.makedirs(D)
n = 1000; w = [1 / k for k in range(1, n + 1)]; s = sum(w); sc = 1_000_000 * n / s
sizes = [max(1, round(x * sc)) for x in w]
buf = os.urandom(4 << 20)
def write_file(path, size):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(size))
    off = 0
    while off < size:
        k = min(size - off, len(buf)); os.write(fd, memoryview(buf)[:k]); off += k
    return fd
def tree(dst, every):
    os.makedirs(dst)
    lock = threading.Lock(); idx = iter(range(n))
    dfd = os.open(dst, os.O_RDONLY)
    def worker():
        k = 0
        while True:
            with lock: i = next(idx, None)
            if i is None: return
            fd = write_file(f"{dst}/f{i:05}", sizes[i])
            libc.sync_file_range(fd, ctypes.c_long(0), ctypes.c_long(0), 2)
            os.close(fd); k += 1
            if every and k % every == 0: libc.syncfs(dfd)
    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    libc.syncfs(dfd); os.close(dfd)
def one(dst):
    os.makedirs(dst)
    total = sum(sizes)
    fd = os.open(f"{dst}/all", os.O_WRONLY | os.O_CREAT, 0o644)
    libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(total))
    off = 0
    while off < total:
        k = min(total - off, len(buf)); os.write(fd, memoryview(buf)[:k]); off += k
        if off % (64 << 20) < k: libc.sync_file_range(fd, ctypes.c_long(0), ctypes.c_long(0), 2)
    os.fsync(fd); os.close(fd)
p = socket.socket(); p.bind(("127.0.0.1", 0)); port = p.getsockname()[1]; p.close()
root = f"{D}/root"; os.makedirs(root)
srv = subprocess.Popen([F, "serve", root, "--listen", f"127.0.0.1:{port}", "--anonymous", "write"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(200):
    try: socket.create_connection(("127.0.0.1", port), 0.2).close(); break
    except OSError: time.sleep(0.05)
def ferry(s, name):
    subprocess.run([F, "cp", "--json", "--no-resume", "-q", "-r", f"{s}/", f"ftp://127.0.0.1:{port}/{name}/"],
                   stdout=subprocess.DEVNULL, check=True)
rows = {"ferry-tree": lambda r: ferry(src, f"tree-{r}"), "ferry-one": lambda r: ferry(onesrc, f"one-{r}"),
        "floor-tree-1sync": lambda r: tree(f"{D}/t1-{r}", 0), "floor-tree-pass32": lambda r: tree(f"{D}/t32-{r}", 32),
        "floor-one": lambda r: one(f"{D}/one-{r}")}
res = {k: [] for k in rows}
log = open(OUT, "a")
def say(x): print(x, flush=True); log.write(x + "\n"); log.flush()
say(f"# floor_pairs.py {' '.join(sys.argv[1:])} at {time.strftime('%F %T')}")
for r in range(R):
    order = list(rows)[r % len(rows):] + list(rows)[:r % len(rows)]
    line = []
    for k in order:
        for d in (src, onesrc):
            for nm in os.listdir(d):
                with open(f"{d}/{nm}", "rb") as f:
                    while f.read(1 << 20): pass
        os.sync(); time.sleep(1.5)
        t = time.perf_counter(); rows[k](r); el = time.perf_counter() - t
        res[k].append(el); line.append(f"{k} {el:.2f}")
        for dp, _, fs in os.walk(D):
            for fn in fs: os.truncate(os.path.join(dp, fn), 0)
    say(f"round {r}: " + ", ".join(line))
srv.terminate(); srv.wait()
med = {k: round(statistics.median(v), 3) for k, v in res.items()}
ratio = lambda a, b: round(statistics.median([x / y for x, y in zip(res[a], res[b])]), 3)
say(json.dumps({"median s": med, "ferry-tree ÷ ferry-one (time)": ratio("ferry-tree", "ferry-one"),
                "floor-tree-1sync ÷ floor-one (time)": ratio("floor-tree-1sync", "floor-one"),
                "floor-tree-pass32 ÷ floor-one (time)": ratio("floor-tree-pass32", "floor-one"),
                "ferry-tree ÷ floor-tree-pass32 (time)": ratio("ferry-tree", "floor-tree-pass32"),
                "ferry-tree ÷ floor-tree-1sync (time)": ratio("ferry-tree", "floor-tree-1sync")}, ensure_ascii=False))
