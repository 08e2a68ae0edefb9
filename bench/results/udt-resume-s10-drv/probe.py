# Polls a copy's restart-record directory the way the test's recorded_bytes
# does (every file, JSON "ranges" summed), 1 ms apart, and reports every poll
# where a `.tmp` file was counted too (a double count).
import json, os, subprocess, sys, time, tempfile, re
FERRY = "/work/wt/s10-drv/target/debug/ferry"
root = tempfile.mkdtemp(dir="/var/tmp/s10-drv-probe"); state = tempfile.mkdtemp(dir="/var/tmp/s10-drv-probe")
users = os.path.join(root, "..", "users-%d.toml" % os.getpid())
p = subprocess.run([FERRY, "passwd", "--users", users, "alice", "--write"], input=b"pw\n", capture_output=True)
srv = subprocess.Popen([FERRY, "serve", root, "--users", users, "--marker-interval", "1", "--listen", "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
line = srv.stdout.readline().decode()
port = re.search(r":(\d+)/?\s*$", line.strip()).group(1)
src = os.path.join(state, "..", "src-%d.bin" % os.getpid())
with open(src, "wb") as f: f.write(os.urandom(48 << 20))
def size(t):
    try: r = json.loads(t)["ranges"]
    except Exception: return None
    return sum(int(b) - int(a) for a, b in (x.split("-") for x in r.split(",") if "-" in x))
doubles = []
for run in range(int(sys.argv[1])):
    for f in os.listdir(state): os.unlink(os.path.join(state, f))
    env = dict(os.environ, FERRY_STATE_DIR=state)
    cp = subprocess.Popen([FERRY, "cp", "-q", "-p", "4", "--max-rate", "16M", "--transport", "udt", "--no-resume", src, "ftp://alice:pw@127.0.0.1:%s/big%d.bin" % (port, run)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    polls = 0
    while cp.poll() is None:
        polls += 1
        seen = {}
        for name in os.listdir(state):
            try: seen[name] = size(open(os.path.join(state, name)).read())
            except FileNotFoundError: pass
        counted = {k: v for k, v in seen.items() if v is not None}
        if any(k.endswith(".tmp") for k in counted):
            doubles.append((run, {k[-8:]: v for k, v in counted.items()}, sum(counted.values())))
        time.sleep(0.001)
    print("run", run, "polls", polls, "double counts so far", len(doubles), flush=True)
for d in doubles: print(d)
srv.kill()
