#!/usr/bin/env python3
"""A simple writer of the mixed tree, the floor Ferry's upload is held to.

`tree`: the tree's 1,000 files (pairs.py's Zipf sizes) written from memory
by 8 threads into DIR (created), each with fallocate and sync_file_range at
its end, a syncfs after every EVERY files per thread (0: none) and one at
the end. With STEPS ("ferry"), each file also takes the steps Ferry's
server takes for a streamed line's file: created anonymous (O_TMPFILE),
its mode and times set (fchmod, utimensat), then linked under its name
(linkat). With prealloc=False (`tree` only), no fallocate: ext4's
delayed allocation places the blocks at writeback. `one`: the same bytes as one file, written back every 64 MiB,
with an fsync at the end.
usage: floor_tree.py DIR EVERY [ferry]"""
import os, sys, threading, ctypes
libc = ctypes.CDLL("libc.so.6", use_errno=True)
N = 1000
_w = [1 / k for k in range(1, N + 1)]
SIZES = [max(1, round(x * 1_000_000 * N / sum(_w))) for x in _w]
BUF = os.urandom(4 << 20)

def _fill(fd, size, prealloc=True):
    if prealloc: libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(size))
    off = 0
    while off < size:
        c = min(size - off, len(BUF)); os.write(fd, memoryview(BUF)[:c]); off += c
    return off

def tree(dst, every, steps=False, prealloc=True):
    os.makedirs(dst)
    lock = threading.Lock(); idx = iter(range(N))
    dfd = os.open(dst, os.O_RDONLY)
    def worker():
        k = 0
        while True:
            with lock: i = next(idx, None)
            if i is None: return
            if steps:
                fd = os.open(dst, os.O_WRONLY | os.O_TMPFILE, 0o600)
            else:
                fd = os.open(f"{dst}/f{i:05}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            _fill(fd, SIZES[i], prealloc)
            libc.sync_file_range(fd, ctypes.c_long(0), ctypes.c_long(0), 2)
            if steps:
                os.fchmod(fd, 0o644)
                os.utime(fd, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
                # linkat(fd, "", AT_FDCWD, name, AT_EMPTY_PATH), as root.
                if libc.linkat(fd, b"", -100, f"{dst}/f{i:05}".encode(), 0x1000) != 0:
                    raise OSError(ctypes.get_errno(), "linkat")
            os.close(fd); k += 1
            if every and k % every == 0: libc.syncfs(dfd)
    ts = [threading.Thread(target=worker) for _ in range(8)]
    for t in ts: t.start()
    for t in ts: t.join()
    libc.syncfs(dfd); os.close(dfd)

def one(dst):
    os.makedirs(dst)
    total = sum(SIZES)
    fd = os.open(f"{dst}/all", os.O_WRONLY | os.O_CREAT, 0o644)
    libc.fallocate(fd, 1, ctypes.c_long(0), ctypes.c_long(total))
    off = 0
    while off < total:
        k = min(total - off, len(BUF)); os.write(fd, memoryview(BUF)[:k]); off += k
        if off % (64 << 20) < k: libc.sync_file_range(fd, ctypes.c_long(0), ctypes.c_long(0), 2)
    os.fsync(fd); os.close(fd)

if __name__ == "__main__":
    tree(sys.argv[1], int(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == "ferry")
