#!/usr/bin/env python3
"""Paired rounds, rows rotated: Ferry's upload of the mixed tree, the simple
writer (floor_tree.py, a syncfs every 32 files per thread) and the writer
with Ferry's per-file steps (O_TMPFILE, fchmod, utimensat, linkat).
usage: steps_pairs.py FERRY ROUNDS OUT"""
import os, sys, time, json
import floor_tree, rounds
F, R, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
D = f"{rounds.W}/steps-{time.strftime('%H%M%S')}"; root = f"{D}/root"; os.makedirs(root)
srv, port = rounds.serve(F, root)
rows = {"ferry-tree": lambda r: rounds.upload(F, port, rounds.SRC, f"t{r}"),
        "writer": lambda r: floor_tree.tree(f"{D}/w{r}", 32),
        "writer-ferry-steps": lambda r: floor_tree.tree(f"{D}/s{r}", 32, steps=True)}
res, say = rounds.run(rows, R, OUT, (rounds.SRC,), D, f"steps_pairs.py {' '.join(sys.argv[1:])}")
srv.terminate(); srv.wait()
q = lambda a, b: rounds.ratio(res, a, b)
say(json.dumps({"median s": rounds.medians(res), "writer-ferry-steps ÷ writer (time)": q("writer-ferry-steps", "writer"),
                "ferry-tree ÷ writer (time)": q("ferry-tree", "writer"),
                "ferry-tree ÷ writer-ferry-steps (time)": q("ferry-tree", "writer-ferry-steps")}, ensure_ascii=False))
