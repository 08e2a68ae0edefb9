#!/usr/bin/env python3
"""Does preallocation cost the tree? Paired rounds on loopback (rows
rotated): the simple writer of session 28 (../small-files-s28/floor_tree.py,
8 threads, a syncfs every 32 files per thread) with its fallocate per file
and without it (ext4's delayed allocation then places the blocks at
writeback), and Ferry's uploads of the tree and of the same bytes as one
file (the issue's anchor).
usage: alloc_pairs.py FERRY ROUNDS OUT"""
import os, sys, time, json, subprocess
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "small-files-s28"))
import floor_tree, rounds
F, R, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
D = f"{rounds.W}/alloc-{time.strftime('%H%M%S')}"; root = f"{D}/root"; os.makedirs(root)
srv, port = rounds.serve(F, root)
alloc_fill = floor_tree._fill
def plain_fill(fd, size):
    off = 0
    while off < size:
        c = min(size - off, len(floor_tree.BUF)); os.write(fd, memoryview(floor_tree.BUF)[:c]); off += c
    return off
def writer(fill, dst):
    floor_tree._fill = fill
    try: floor_tree.tree(dst, 32)
    finally: floor_tree._fill = alloc_fill
def ferry(s, name):
    subprocess.run([F, "cp", "--json", "--no-resume", "-q", "-r", f"{s}/", f"ftp://127.0.0.1:{port}/{name}/"],
                   stdout=subprocess.DEVNULL, check=True)
rows = {"ferry-tree": lambda r: ferry(rounds.SRC, f"tree-{r}"), "ferry-one": lambda r: ferry(rounds.ONE, f"one-{r}"),
        "floor-alloc": lambda r: writer(alloc_fill, f"{D}/a-{r}"),
        "floor-noalloc": lambda r: writer(plain_fill, f"{D}/n-{r}")}
res, say = rounds.run(rows, R, OUT, (rounds.SRC, rounds.ONE), D, f"alloc_pairs.py {' '.join(sys.argv[1:])}")
srv.terminate(); srv.wait()
q = lambda a, b: rounds.ratio(res, a, b)
say(json.dumps({"median s": rounds.medians(res),
                "floor-noalloc ÷ floor-alloc (time)": q("floor-noalloc", "floor-alloc"),
                "floor-alloc ÷ ferry-one (time)": q("floor-alloc", "ferry-one"),
                "floor-noalloc ÷ ferry-one (time)": q("floor-noalloc", "ferry-one"),
                "ferry-tree ÷ ferry-one (time)": q("ferry-tree", "ferry-one")}, ensure_ascii=False))
