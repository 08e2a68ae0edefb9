#!/usr/bin/env python3
"""The disk's floor for the mixed tree made durable: the tree's 1,000 files
(the same Zipf sizes as pairs.py's) written from memory into the page cache
by 8 threads, then one syncfs; against the same bytes as one file + fsync.
Variants: fallocate each file first (as Ferry does for ALLO >= 64 KiB),
and a syncfs after every 32 files per thread (Ferry's passes).
usage: floor.py DIR ROUNDS"""
import os, sys, time, threading, ctypes, shutil
libc = ctypes.CDLL("libc.so.6", use_errno=True)
D, R = sys.argv[1], int(sys.argv[2])
n = 1000; w = [1 / k for k in range(1, n + 1)]; s = sum(w); sc = 1_000_000 * n / s
sizes = [max(1, round(x * sc)) for x in w]
buf = os.urandom(max(sizes))
big = bytes(8 << 20)
def write_file(path, size, falloc):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    if falloc: os.posix_fallocate(fd, 0, size) if False else libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(size))
    off = 0
    while off < size:
        k = min(size - off, 4 << 20); os.write(fd, memoryview(buf)[:k] if k <= len(buf) else big[:k]); off += k
    return fd
def tree(dst, falloc, every):
    os.makedirs(dst)
    fds = []; lock = threading.Lock(); idx = iter(range(n))
    def worker():
        k = 0
        while True:
            with lock: i = next(idx, None)
            if i is None: return
            fd = write_file(f"{dst}/f{i:05}", sizes[i], falloc)
            libc.sync_file_range(fd, ctypes.c_long(0), ctypes.c_long(0), 2)
            os.close(fd); k += 1
            if every and k % every == 0: libc.syncfs(dfd)
    dfd = os.open(dst, os.O_RDONLY)
    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    libc.syncfs(dfd); os.close(dfd)
def one(dst, falloc):
    os.makedirs(dst)
    total = sum(sizes)
    fd = os.open(f"{dst}/all", os.O_WRONLY | os.O_CREAT, 0o644)
    if falloc: libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(total))
    off = 0
    while off < total:
        k = min(total - off, len(buf)); os.write(fd, memoryview(buf)[:k]); off += k
        if off % (64 << 20) < k: libc.sync_file_range(fd, ctypes.c_long(0), ctypes.c_long(0), 2)
    os.fsync(fd); os.close(fd)
rows = {"one": lambda d: one(d, True), "tree": lambda d: tree(d, False, 0), "tree-falloc": lambda d: tree(d, True, 0),
        "tree-falloc-pass32": lambda d: tree(d, True, 32)}
res = {k: [] for k in rows}
for r in range(R):
    order = list(rows)[r % len(rows):] + list(rows)[:r % len(rows)]
    line = []
    for k in order:
        d = f"{D}/{k}-{r}-{time.time_ns()}"
        os.sync(); time.sleep(1)
        t = time.perf_counter(); rows[k](d); el = time.perf_counter() - t
        res[k].append(el); line.append(f"{k} {el:.2f}")
    print(f"round {r}: " + ", ".join(line), flush=True)
import statistics
print({k: round(statistics.median(v), 3) for k, v in res.items()})
