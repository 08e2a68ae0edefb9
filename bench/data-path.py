#!/usr/bin/env python3
"""Measures Ferry's data-path variants against their anchors, in one run.

    bench/data-path.py [--quick] [--reps N] [--out bench/results/data-path]

Sections (each a table in OUT/README.md, plotted in OUT/*.svg):

  A. memory to memory on loopback: Ferry zero-copy, buffered and staged,
     1 and 4 streams, against iperf3 and Globus GridFTP (same bytes);
  B. disk to disk (caches dropped before every run): Ferry synchronous,
     staged, staged with O_DIRECT, against Globus and fio's sequential
     read and write of the same disk (direct I/O, 1 MiB blocks);
  C. peak memory of the server (VmHWM) by staging size;
  D. a long path (ferry-wan, 80 ms one way, 1 Gbit/s): the fixed cost of a
     fresh 1 MiB download in round trips, and 256 MiB / 1 GiB rates, Ferry
     with automatic sizing against Globus.

Every figure is the median of --reps runs; CPU is user+system seconds per
GB of the client (wait4) plus the server (/proc/PID/stat delta). Needs
root (drop_caches, namespaces), the release binaries (cargo build
--release -p ferry -p ferry-wan), globus-gridftp-server, globus-url-copy,
iperf3 and fio (scripts/deps.sh and bench/deps.sh install them).
"""

import argparse
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
HZ = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def proc_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    # utime stime cutime cstime (the Globus daemon forks a child per session)
    return sum(int(x) for x in f[11:15]) / HZ


def proc_hwm_kib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def settle_cpu(pid, timeout=5.0):
    """The server's CPU once it has stopped moving (a session may still be
    closing when the client exits)."""
    last, t0 = proc_cpu(pid), time.time()
    while time.time() - t0 < timeout:
        time.sleep(0.2)
        now = proc_cpu(pid)
        if now == last:
            return now
        last = now
    return last


def run_client(cmd, env=None, timeout=600):
    """Wall seconds, client CPU seconds, stderr tail; raises on failure."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
    try:
        _, status, ru = os.wait4(p.pid, 0)
    except KeyboardInterrupt:
        p.kill()
        raise
    wall = time.time() - t0
    err = p.stderr.read().decode(errors="replace")
    if status != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {err[-400:]}")
    return wall, ru.ru_utime + ru.ru_stime, err


def drop_caches():
    subprocess.run(["sync"], check=True)
    open("/proc/sys/vm/drop_caches", "w").write("3\n")


class Server:
    """A server process; Ferry or the Globus daemon (as nobody)."""

    def __init__(self, cmd, port, env=None, cwd=None):
        self.port = port
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  env={**os.environ, **(env or {})}, cwd=cwd, start_new_session=True)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"server {cmd[0]} did not start")

    @property
    def pid(self):
        return self.p.pid

    def stop(self):
        try:
            os.killpg(self.p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.p.wait(timeout=10)


def ferry_server(ferry, root, zero_bytes, extra=(), env=None):
    """`ferry serve` with a virtual /dev/zero of exactly `zero_bytes`."""
    port = free_port()
    cmd = [ferry, "serve", str(root), "--listen", f"127.0.0.1:{port}", "--anonymous", "write", "--memory-paths",
           "--memory-zero-size", str(zero_bytes), *extra]
    return Server(cmd, port, env)


def globus_server(root):
    port = free_port()
    cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server", "-c",
           "/dev/null", "-aa", "-p", str(port), "-control-interface", "127.0.0.1", "-data-interface",
           "127.0.0.1"]
    return Server(cmd, port, cwd=str(root))


def measure(label, reps, server, client_cmd, nbytes, env=None, before=None, after=None):
    """Runs the client `reps` times; medians of MB/s and CPU-s/GB."""
    rates, cpus = [], []
    for _ in range(reps):
        if before:
            before()
        s0 = proc_cpu(server.pid) if server else 0.0
        wall, ccpu, _ = run_client(client_cmd, env)
        extra = after() if after else 0.0
        wall += extra
        scpu = settle_cpu(server.pid) - s0 if server else 0.0
        rates.append(nbytes / wall / 1e6)
        cpus.append((ccpu + scpu) / (nbytes / 1e9))
    row = {"label": label, "mb_s": statistics.median(rates), "min": min(rates), "max": max(rates),
           "cpu_s_gb": statistics.median(cpus), "cmd": " ".join(client_cmd)}
    if server:
        row["server_hwm_mib"] = proc_hwm_kib(server.pid) / 1024
    print(f"  {label:44s} {row['mb_s']:8.0f} MB/s ({row['min']:.0f}-{row['max']:.0f})  "
          f"{row['cpu_s_gb']:.3f} CPU-s/GB", flush=True)
    return row


def iperf(streams, nbytes, reps):
    port = free_port()
    srv = subprocess.Popen(["iperf3", "-s", "-p", str(port), "-1"], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    rates = []
    try:
        for i in range(reps):
            if i:
                srv = subprocess.Popen(["iperf3", "-s", "-p", str(port), "-1"], stdout=subprocess.DEVNULL)
                time.sleep(0.3)
            out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-P", str(streams), "-n",
                                  str(nbytes), "-J"], capture_output=True, text=True, check=True).stdout
            j = json.loads(out)
            rates.append(j["end"]["sum_received"]["bits_per_second"] / 8 / 1e6)
            srv.wait(timeout=10)
    finally:
        if srv.poll() is None:
            srv.kill()
    row = {"label": f"iperf3 -P {streams}", "mb_s": statistics.median(rates), "min": min(rates),
           "max": max(rates), "cpu_s_gb": None, "cmd": f"iperf3 -c 127.0.0.1 -P {streams} -n {nbytes}"}
    print(f"  {row['label']:44s} {row['mb_s']:8.0f} MB/s", flush=True)
    return row


def fio(kind, path, size, reps):
    rates = []
    for _ in range(reps):
        drop_caches()
        out = subprocess.run(["fio", "--name=seq", f"--filename={path}", f"--rw={kind}", "--bs=1M",
                              f"--size={size}", "--direct=1", "--ioengine=psync", "--output-format=json"],
                             capture_output=True, text=True, check=True).stdout
        j = json.loads(out[out.index("{"):])
        side = j["jobs"][0]["read" if kind == "read" else "write"]
        rates.append(side["bw_bytes"] / 1e6)
    row = {"label": f"fio sequential {kind} (direct, 1 MiB)", "mb_s": statistics.median(rates),
           "min": min(rates), "max": max(rates), "cpu_s_gb": None,
           "cmd": f"fio --rw={kind} --bs=1M --size={size} --direct=1 --ioengine=psync"}
    print(f"  {row['label']:44s} {row['mb_s']:8.0f} MB/s", flush=True)
    return row


def fio_copy(src, dst, size, reps):
    """fio reading `src` while it writes `dst` on the same disk: what a copy
    between two directories of one disk can do at best."""
    rates = []
    for _ in range(reps):
        drop_caches()
        out = subprocess.run(["fio", "--output-format=json", "--bs=1M", f"--size={size}", "--direct=1",
                              "--ioengine=psync", "--name=r", f"--filename={src}", "--rw=read",
                              "--name=w", f"--filename={dst}", "--rw=write"],
                             capture_output=True, text=True, check=True).stdout
        j = json.loads(out[out.index("{"):])
        r = j["jobs"][0]["read"]["bw_bytes"]
        w = j["jobs"][1]["write"]["bw_bytes"]
        rates.append(min(r, w) / 1e6)
    row = {"label": "fio read + write at once (direct, 1 MiB)", "mb_s": statistics.median(rates),
           "min": min(rates), "max": max(rates), "cpu_s_gb": None,
           "cmd": f"fio --bs=1M --size={size} --direct=1 --name=r --rw=read --name=w --rw=write (slower of the two)"}
    print(f"  {row['label']:44s} {row['mb_s']:8.0f} MB/s", flush=True)
    return row


def table(rows, anchor=None):
    lines = ["| variant | MB/s (median, min–max) | CPU s/GB (client + server) | server peak RSS | ÷ anchor |",
             "|---|---|---|---|---|"]
    for r in rows:
        cpu = f"{r['cpu_s_gb']:.3f}" if r.get("cpu_s_gb") is not None else "—"
        hwm = f"{r['server_hwm_mib']:.0f} MiB" if r.get("server_hwm_mib") else "—"
        ratio = f"{r['mb_s'] / anchor:.2f}" if anchor else "—"
        lines.append(f"| {r['label']} | {r['mb_s']:.0f} ({r['min']:.0f}–{r['max']:.0f}) | {cpu} | {hwm} | {ratio} |")
    return "\n".join(lines)


def svg_bars(rows, title, path):
    """A plain horizontal bar chart of MB/s."""
    w, bar, gap, left = 760, 22, 8, 330
    h = 50 + len(rows) * (bar + gap)
    top = max(r["mb_s"] for r in rows) or 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<text x="10" y="20" font-size="14">{title}</text>']
    for i, r in enumerate(rows):
        y = 35 + i * (bar + gap)
        bw = (w - left - 90) * r["mb_s"] / top
        colour = "#888" if r["label"].startswith(("iperf3", "fio", "Globus")) else "#2a6fb0"
        out.append(f'<text x="10" y="{y + 15}">{r["label"]}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{bw:.1f}" height="{bar}" fill="{colour}"/>')
        out.append(f'<text x="{left + bw + 5:.1f}" y="{y + 15}">{r["mb_s"]:.0f} MB/s</text>')
    out.append("</svg>")
    pathlib.Path(path).write_text("\n".join(out))


MEMORY_VARIANTS = [
    # label, environment (both ends), server flags, client flags
    ("Ferry zero-copy", {}, [], []),
    ("Ferry buffered", {"FERRY_DATA_PATH": "buffered"}, [], []),
    ("Ferry staged 16 MiB", {}, ["--staging", "16M"], []),
]


def section_memory(a, ferry, work):
    n = a.mem_bytes
    rows = []
    print(f"A. memory to memory on loopback, {n >> 20} MiB", flush=True)
    for label, env, srv_flags, cli_flags in MEMORY_VARIANTS:
        srv = ferry_server(ferry, work, n, srv_flags, env)
        try:
            for p in (1, 4):
                cmd = [ferry, "cp", "-q", "--no-resume", "-p", str(p), *cli_flags,
                       f"ftp://127.0.0.1:{srv.port}/dev/zero", "/dev/null"]
                rows.append(measure(f"{label}, -p {p}", a.reps, srv, cmd, n, env))
        finally:
            srv.stop()
    g = globus_server(work)
    try:
        for p in (1, 4):
            cmd = ["globus-url-copy", "-p", str(p), "-len", str(n), f"ftp://127.0.0.1:{g.port}/dev/zero",
                   "file:///dev/null"]
            rows.append(measure(f"Globus GridFTP -p {p}", a.reps, g, cmd, n))
    finally:
        g.stop()
    for p in (1, 4):
        rows.append(iperf(p, n, a.reps))
    return rows


DISK_VARIANTS = [
    # label, server flags, client flags
    ("Ferry synchronous (sendfile, page cache)", [], []),
    ("Ferry staged 16 MiB", ["--staging", "16M"], ["--staging", "16M"]),
    ("Ferry staged 16 MiB + O_DIRECT", ["--staging", "16M", "--direct-io"], ["--staging", "16M", "--direct-io"]),
]


def disk_source(a, disk):
    """The source file on the disk (made once), readable by nobody."""
    n = a.disk_bytes
    src_dir, dst_dir = disk / "src", disk / "dst"
    src_dir.mkdir(parents=True, exist_ok=True)
    dst_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(disk, 0o755)
    for d in (src_dir, dst_dir):
        shutil.chown(d, "nobody", "nogroup")
    src = src_dir / "data.bin"
    if not src.exists() or src.stat().st_size != n:
        subprocess.run(["dd", "if=/dev/urandom", f"of={src}", "bs=1M", f"count={n >> 20}", "status=none"],
                       check=True)
        shutil.chown(src, "nobody", "nogroup")
    return src, dst_dir / "data.bin"


def section_disk(a, ferry, disk):
    """A file on the disk, read by the server and written by the client,
    timed until the data is on the disk (`sync` included)."""
    n = a.disk_bytes
    src, dst = disk_source(a, disk)
    src_dir = src.parent

    def before():
        if dst.exists():
            dst.unlink()
        drop_caches()

    def until_synced():
        t = time.time()
        subprocess.run(["sync"], check=True)
        return time.time() - t

    rows = []
    print(f"B. disk to disk, {n >> 20} MiB on {disk}", flush=True)
    for label, srv_flags, cli_flags in DISK_VARIANTS:
        srv = ferry_server(ferry, src_dir, 1, srv_flags)
        try:
            for p in (1, 4):
                cmd = [ferry, "cp", "-q", "--no-resume", "-p", str(p), *cli_flags,
                       f"ftp://127.0.0.1:{srv.port}/data.bin", str(dst)]
                rows.append(measure(f"{label}, -p {p}", a.reps, srv, cmd, n, before=before, after=until_synced))
        finally:
            srv.stop()
    g = globus_server(src_dir)
    try:
        for p in (1, 4):
            cmd = ["globus-url-copy", "-p", str(p), f"ftp://127.0.0.1:{g.port}{src}", f"file://{dst}"]
            rows.append(measure(f"Globus GridFTP -p {p}", a.reps, g, cmd, n, before=before, after=until_synced))
    finally:
        g.stop()
    scratch = disk / "fio.bin"
    rows.append(fio("read", src, n, a.reps))
    rows.append(fio("write", scratch, n, a.reps))
    rows.append(fio_copy(src, scratch, n, a.reps))
    scratch.unlink(missing_ok=True)
    if dst.exists():
        dst.unlink()
    return rows


def section_memory_bound(a, ferry, disk):
    """Server VmHWM while it sends a disk file with each staging size. The
    rate is capped (200 MB/s) so the readers, faster than the network,
    fill the ring to its high-water mark: the peak then shows the bound."""
    n = a.disk_bytes
    src_dir = disk_source(a, disk)[0].parent
    rows = []
    print("C. peak memory by staging size", flush=True)
    for ring in ["off", "2M", "16M", "64M"]:
        srv = ferry_server(ferry, src_dir, 1, ["--staging", ring, "--max-transfer-rate", "200M"])
        try:
            cmd = [ferry, "cp", "-q", "--no-resume", "-p", "4", f"ftp://127.0.0.1:{srv.port}/data.bin", "/dev/null"]
            rows.append(measure(f"staging {ring}, -p 4, disk to /dev/null", 1, srv, cmd, n, before=drop_caches))
        finally:
            srv.stop()
    return rows


LONG_PATH = r"""
set -u
C=$FERRY_WAN_CLIENT_NS; S=$FERRY_WAN_SERVER_NS; SIP=$FERRY_WAN_SERVER_IP
F={ferry}; D={shm}
ip netns exec $S $F serve $D --listen $SIP:0 --anonymous read > $D/srv.out 2>/dev/null &
SPID=$!
cd $D && ip netns exec $S setpriv --reuid=nobody --regid=nogroup --init-groups globus-gridftp-server -c /dev/null   -aa -p {gport} -control-interface $SIP -data-interface $SIP &
GPID=$!
sleep 1
URL=$(sed -nE 's/.* on (ftp:\/\/[^ ]*).*/\1/p' $D/srv.out | head -1)
RTT=$(ip netns exec $C python3 -c "
import socket,time
ts=[]
for i in range(5):
    s=socket.socket(); t=time.perf_counter(); s.connect(('$SIP',{gport})); ts.append(time.perf_counter()-t); s.close()
print(min(ts))")
echo "rtt $RTT"
for rep in $(seq 1 {reps}); do
  for f in f1 f256 f1g; do
    s=$(date +%s.%N); ip netns exec $C $F cp -q --no-resume ${{URL}}$f /dev/null; e=$(date +%s.%N)
    echo "ferry $f $s $e"
    s=$(date +%s.%N); ip netns exec $C globus-url-copy -p 4 ftp://$SIP:{gport}$D/$f file:///dev/null; e=$(date +%s.%N)
    echo "globus $f $s $e"
  done
done
kill $SPID; kill -9 $GPID; pkill -9 -f "globus-gridftp-server .*-p {gport} " || true
"""


def section_long_path(a, ferry, wan):
    shm = pathlib.Path("/dev/shm/ferry-data-path")
    shm.mkdir(exist_ok=True)
    os.chmod(shm, 0o755)
    sizes = {"f1": 1 << 20, "f256": 256 << 20, "f1g": 1 << 30}
    for name, size in sizes.items():
        f = shm / name
        if not f.exists() or f.stat().st_size != size:
            subprocess.run(["dd", "if=/dev/urandom", f"of={f}", "bs=1M", f"count={max(size >> 20, 1)}",
                            "status=none"], check=True)
        os.chmod(f, 0o644)
    script = shm / "run.sh"
    script.write_text(LONG_PATH.format(ferry=ferry, shm=shm, gport=free_port(), reps=a.reps))
    print("D. long path: 80 ms one way, 1 Gbit/s", flush=True)
    # The namespaces need a hosts file naming the server's address, or the
    # Globus server cannot start (reference/globus/wan.md).
    out = subprocess.run([wan, "up", "--name", f"dp{os.getpid() % 1000}", "--delay", "80ms", "--rate", "1gbit",
                          "--shaper", "tbf", "--", "bash", str(script)], capture_output=True, text=True, timeout=1800)
    text = out.stdout
    rtt = float(re.search(r"rtt ([0-9.]+)", text).group(1))
    runs = {}
    for m in re.finditer(r"^(ferry|globus) (\S+) ([0-9.]+) ([0-9.]+)$", text, re.M):
        runs.setdefault((m.group(1), m.group(2)), []).append(float(m.group(4)) - float(m.group(3)))
    rows = []
    for (tool, f), walls in sorted(runs.items()):
        wall = statistics.median(walls)
        size = sizes[f]
        label = f"{'Ferry, automatic sizing' if tool == 'ferry' else 'Globus GridFTP -p 4'}, {size >> 20} MiB"
        rows.append({"label": label, "mb_s": size / wall / 1e6, "min": size / max(walls) / 1e6,
                     "max": size / min(walls) / 1e6, "cpu_s_gb": None, "wall_s": wall, "rtts": wall / rtt,
                     "cmd": "ferry cp URL /dev/null" if tool == "ferry" else "globus-url-copy -p 4 URL file:///dev/null"})
        print(f"  {label:44s} {wall:7.3f} s = {wall / rtt:5.1f} RTT", flush=True)
    return rows, rtt


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ferry", default=str(ROOT / "target/release/ferry"))
    ap.add_argument("--wan", default=str(ROOT / "target/release/ferry-wan"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller sizes, one repetition")
    ap.add_argument("--disk-dir", default="/var/tmp/ferry-data-path")
    ap.add_argument("--out", default=str(ROOT / "bench/results/data-path"))
    ap.add_argument("--sections", default="memory,disk,memory-bound,long-path")
    a = ap.parse_args()
    a.mem_bytes = (1 << 30) if a.quick else (4 << 30)
    a.disk_bytes = (512 << 20) if a.quick else (2 << 30)
    if a.quick:
        a.reps = 1
    out = pathlib.Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    disk = pathlib.Path(a.disk_dir)
    disk.mkdir(parents=True, exist_ok=True)
    work = pathlib.Path(tempfile.mkdtemp(prefix="ferry-dp-"))
    os.chmod(work, 0o755)
    sections = a.sections.split(",")
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip()
    load = open("/proc/loadavg").read().split()[:3]
    doc = ["# Data-path measurements", "",
           f"`bench/data-path.py {' '.join(sys.argv[1:])}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
           f"Ferry {commit}, {os.cpu_count()} cores, load average before the run {' '.join(load)}. "
           f"Medians of {a.reps} run(s) (min–max). MB/s = 10^6 B/s; CPU = user + system seconds per GB, "
           "client (wait4) + server (/proc/PID/stat).", ""]
    try:
        if "memory" in sections:
            rows = section_memory(a, ferry := a.ferry, work)
            anchor = next(r["mb_s"] for r in rows if r["label"] == "Globus GridFTP -p 1")
            doc += ["## A. Memory to memory on loopback", "",
                    f"{a.mem_bytes >> 20} MiB from the server's `/dev/zero` to the client's `/dev/null`. "
                    "Ratio column: ÷ Globus GridFTP -p 1.", "", table(rows, anchor), "", "![](memory.svg)", ""]
            svg_bars(rows, "Memory to memory on loopback (MB/s)", out / "memory.svg")
        if "disk" in sections:
            rows = section_disk(a, a.ferry, disk)
            limit = min(r["mb_s"] for r in rows if r["label"].startswith("fio sequential"))
            doc += ["## B. Disk to disk", "",
                    f"{a.disk_bytes >> 20} MiB of random data read by the server from `{disk}/src` and written by "
                    f"the client to `{disk}/dst`, page cache dropped before every run, timed until `sync` returns. "
                    "Ratio column: ÷ min(fio read, fio write), each measured alone. Both ends share this "
                    "machine's one disk, so a copy reads and writes it at once: the `fio read + write at once` "
                    "row is what that allows.", "", table(rows, limit), "", "![](disk.svg)", ""]
            svg_bars(rows, "Disk to disk (MB/s, until sync)", out / "disk.svg")
        if "memory-bound" in sections:
            rows = section_memory_bound(a, a.ferry, disk)
            doc += ["## C. Peak memory by staging size", "",
                    "The server's VmHWM (peak resident set) after sending the disk file with four streams.", "",
                    table(rows), ""]
        if "long-path" in sections:
            rows, rtt = section_long_path(a, a.ferry, a.wan)
            lines = ["| transfer | wall s (median) | round trips | MB/s (min–max) |", "|---|---|---|---|"]
            for r in rows:
                lines.append(f"| {r['label']} | {r['wall_s']:.3f} | {r['rtts']:.1f} | {r['mb_s']:.1f} "
                             f"({r['min']:.1f}–{r['max']:.1f}) |")
            doc += ["## D. A long path", "",
                    f"`ferry-wan up --delay 80ms --rate 1gbit --shaper tbf` (measured RTT {rtt * 1e3:.1f} ms), "
                    "files in the server namespace's /dev/shm, to /dev/null, wall clock of the whole client "
                    "process (connect, login, transfer, exit).", "", "\n".join(lines), ""]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (out / "README.md").write_text("\n".join(doc))
    print(f"wrote {out / 'README.md'}")


if __name__ == "__main__":
    main()
