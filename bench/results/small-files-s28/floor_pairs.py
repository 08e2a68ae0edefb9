#!/usr/bin/env python3
"""Paired rounds on loopback, each row once per round in a rotated order:
Ferry's upload of the mixed tree, Ferry's upload of the same bytes as one
file, and the simple writer (floor_tree.py, no network, no server): the
tree with one syncfs at its end, the tree with a syncfs after every 32
files per thread (as Ferry's passes), and one file with an fsync.
usage: floor_pairs.py FERRY ROUNDS OUT"""
import os, sys, time, json
import floor_tree, rounds
F, R, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
D = f"{rounds.W}/floor-{time.strftime('%H%M%S')}"; root = f"{D}/root"; os.makedirs(root)
srv, port = rounds.serve(F, root)
ferry = lambda s, name: rounds.upload(F, port, s, name)
rows = {"ferry-tree": lambda r: ferry(rounds.SRC, f"tree-{r}"), "ferry-one": lambda r: ferry(rounds.ONE, f"one-{r}"),
        "floor-tree-1sync": lambda r: floor_tree.tree(f"{D}/t1-{r}", 0),
        "floor-tree-pass32": lambda r: floor_tree.tree(f"{D}/t32-{r}", 32),
        "floor-one": lambda r: floor_tree.one(f"{D}/one-{r}")}
res, say = rounds.run(rows, R, OUT, (rounds.SRC, rounds.ONE), D, f"floor_pairs.py {' '.join(sys.argv[1:])}")
srv.terminate(); srv.wait()
q = lambda a, b: rounds.ratio(res, a, b)
say(json.dumps({"median s": rounds.medians(res), "ferry-tree ÷ ferry-one (time)": q("ferry-tree", "ferry-one"),
                "floor-tree-1sync ÷ floor-one (time)": q("floor-tree-1sync", "floor-one"),
                "floor-tree-pass32 ÷ floor-one (time)": q("floor-tree-pass32", "floor-one"),
                "ferry-tree ÷ floor-tree-pass32 (time)": q("ferry-tree", "floor-tree-pass32"),
                "ferry-tree ÷ floor-tree-1sync (time)": q("ferry-tree", "floor-tree-1sync")}, ensure_ascii=False))
