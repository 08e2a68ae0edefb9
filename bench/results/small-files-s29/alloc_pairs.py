#!/usr/bin/env python3
"""Does preallocation cost the tree? Paired rounds on loopback (rows
rotated): the simple writer of session 28 (../small-files-s28/floor_tree.py,
8 threads, a syncfs every 32 files per thread) with its fallocate per file
and without it (ext4's delayed allocation then places the blocks at
writeback), and Ferry's uploads of the tree and of the same bytes as one
file (the issue's anchor).
usage: alloc_pairs.py FERRY ROUNDS OUT"""
import os, sys, time, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "small-files-s28"))
import floor_tree, rounds
F, R, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
D = f"{rounds.W}/alloc-{time.strftime('%H%M%S')}"; root = f"{D}/root"; os.makedirs(root)
srv, port = rounds.serve(F, root)
rows = {"ferry-tree": lambda r: rounds.upload(F, port, rounds.SRC, f"tree-{r}"),
        "ferry-one": lambda r: rounds.upload(F, port, rounds.ONE, f"one-{r}"),
        "floor-alloc": lambda r: floor_tree.tree(f"{D}/a-{r}", 32),
        "floor-noalloc": lambda r: floor_tree.tree(f"{D}/n-{r}", 32, prealloc=False)}
res, say = rounds.run(rows, R, OUT, (rounds.SRC, rounds.ONE), D, f"alloc_pairs.py {' '.join(sys.argv[1:])}")
srv.terminate(); srv.wait()
q = lambda a, b: rounds.ratio(res, a, b)
say(json.dumps({"median s": rounds.medians(res),
                "floor-noalloc ÷ floor-alloc (time)": q("floor-noalloc", "floor-alloc"),
                "floor-alloc ÷ ferry-one (time)": q("floor-alloc", "ferry-one"),
                "floor-noalloc ÷ ferry-one (time)": q("floor-noalloc", "ferry-one"),
                "ferry-tree ÷ ferry-one (time)": q("ferry-tree", "ferry-one")}, ensure_ascii=False))
