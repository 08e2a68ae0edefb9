"""What floor_pairs.py and steps_pairs.py share: a `ferry serve` on a free
loopback port, and paired rounds whose rows run once each in an order
rotated round by round, each after its sources are read (this machine's
DAMON pages out idle page cache) and the file system is written back, with
every output truncated after its row (not deleted: ext4 scans past inodes
freed in the last minutes on the next creates)."""
import os, time, socket, subprocess, statistics

W = "/var/tmp/lead/s19/pairs-mixed"
SRC, ONE = f"{W}/src", f"{W}/one"

def serve(ferry, root):
    """A `ferry serve ROOT` with anonymous write access: (process, port)."""
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    p = subprocess.Popen([ferry, "serve", root, "--listen", f"127.0.0.1:{port}", "--anonymous", "write"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try: socket.create_connection(("127.0.0.1", port), 0.2).close(); return p, port
        except OSError: time.sleep(0.05)
    raise SystemExit(f"no server on {port}")

def upload(ferry, port, src, name):
    """`ferry cp -r SRC/` to the server on `port` as NAME/, fresh (no resume)."""
    subprocess.run([ferry, "cp", "--json", "--no-resume", "-q", "-r", f"{src}/", f"ftp://127.0.0.1:{port}/{name}/"],
                   stdout=subprocess.DEVNULL, check=True)

def run(rows, rounds, out, sources, scratch, title):
    """Runs `rows` (name -> function of the round) `rounds` times; logs each
    round to `out`; returns (name -> list of seconds, the logger)."""
    res = {k: [] for k in rows}; log = open(out, "a")
    def say(x): print(x, flush=True); log.write(x + "\n"); log.flush()
    say(f"# {title} at {time.strftime('%F %T')}")
    for r in range(rounds):
        order = list(rows)[r % len(rows):] + list(rows)[:r % len(rows)]; line = []
        for k in order:
            for d in sources:
                for nm in os.listdir(d):
                    with open(f"{d}/{nm}", "rb") as f:
                        while f.read(1 << 20): pass
            os.sync(); time.sleep(1.5)
            t = time.perf_counter(); rows[k](r); el = time.perf_counter() - t
            res[k].append(el); line.append(f"{k} {el:.2f}")
            for dp, _, fs in os.walk(scratch):
                for fn in fs: os.truncate(os.path.join(dp, fn), 0)
        say(f"round {r}: " + ", ".join(line))
    return res, say

def ratio(res, a, b):
    """Median of the per-round time ratios a ÷ b."""
    return round(statistics.median([x / y for x, y in zip(res[a], res[b])]), 3)

def medians(res):
    return {k: round(statistics.median(v), 3) for k, v in res.items()}
