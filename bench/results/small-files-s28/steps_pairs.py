#!/usr/bin/env python3
"""Paired rounds, rows rotated: Ferry's upload of the mixed tree, the simple
writer (floor_tree.py, a syncfs every 32 files per thread) and the writer
with Ferry's per-file steps (O_TMPFILE, fchmod, utimensat, linkat).
Outputs truncated after each row.
usage: steps_pairs.py FERRY ROUNDS OUT"""
import os, sys, time, json, socket, subprocess, statistics
F, R, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
H = os.path.dirname(os.path.abspath(__file__))
W = "/var/tmp/lead/s19/pairs-mixed"; src = f"{W}/src"
D = f"{W}/steps-{time.strftime('%H%M%S')}"; root = f"{D}/root"; os.makedirs(root)
p = socket.socket(); p.bind(("127.0.0.1", 0)); port = p.getsockname()[1]; p.close()
srv = subprocess.Popen([F, "serve", root, "--listen", f"127.0.0.1:{port}", "--anonymous", "write"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for _ in range(200):
    try: socket.create_connection(("127.0.0.1", port), 0.2).close(); break
    except OSError: time.sleep(0.05)
rows = {"ferry-tree": lambda r: [F, "cp", "--json", "--no-resume", "-q", "-r", f"{src}/", f"ftp://127.0.0.1:{port}/t{r}/"],
        "writer": lambda r: ["python3", f"{H}/floor_tree.py", f"{D}/w{r}", "32"],
        "writer-ferry-steps": lambda r: ["python3", f"{H}/floor_tree.py", f"{D}/s{r}", "32", "ferry"]}
res = {k: [] for k in rows}; log = open(OUT, "a")
def say(x): print(x, flush=True); log.write(x + "\n"); log.flush()
say(f"# steps_pairs.py {' '.join(sys.argv[1:])} at {time.strftime('%F %T')}")
for r in range(R):
    order = list(rows)[r % len(rows):] + list(rows)[:r % len(rows)]; line = []
    for k in order:
        for nm in os.listdir(src):
            with open(f"{src}/{nm}", "rb") as f:
                while f.read(1 << 20): pass
        os.sync(); time.sleep(1.5)
        t = time.perf_counter(); subprocess.run(rows[k](r), stdout=subprocess.DEVNULL, check=True); el = time.perf_counter() - t
        res[k].append(el); line.append(f"{k} {el:.2f}")
        for dp, _, fs in os.walk(D):
            for fn in fs: os.truncate(os.path.join(dp, fn), 0)
    say(f"round {r}: " + ", ".join(line))
srv.terminate(); srv.wait()
ratio = lambda a, b: round(statistics.median([x / y for x, y in zip(res[a], res[b])]), 3)
say(json.dumps({"median s": {k: round(statistics.median(v), 3) for k, v in res.items()},
                "writer-ferry-steps ÷ writer (time)": ratio("writer-ferry-steps", "writer"),
                "ferry-tree ÷ writer (time)": ratio("ferry-tree", "writer"),
                "ferry-tree ÷ writer-ferry-steps (time)": ratio("ferry-tree", "writer-ferry-steps")}, ensure_ascii=False))
