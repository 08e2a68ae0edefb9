#!/bin/sh
# Per-file latency of `ferry serve` for a plain FTP client uploading 4 KiB
# files one after another with ALLO (Python's ftplib), root on /dev/shm:
# min/median/max ms of ALLO + STOR up to the 226. Moved here from the test
# suite (crates/cli/tests/small_file_latency.rs, which now asserts the
# structure: no upload announced with ALLO waits on the control watch).
# A 5 ms wait after each file would show as a minimum above ~5 ms; the
# suite used to require the fastest of 60 under 4.5 ms.
#
# usage: bench/small-file-stor-latency.sh [FERRY] [N]
set -eu
FERRY=${1:-target/release/ferry}
N=${2:-200}
ROOT=$(mktemp -d /dev/shm/ferry-lat.XXXXXX)
OUT=$(mktemp)
trap 'kill $SP 2>/dev/null; rm -rf "$ROOT" "$OUT"' EXIT
"$FERRY" serve "$ROOT" --listen 127.0.0.1:0 --anonymous write >"$OUT" 2>/dev/null &
SP=$!
for _ in $(seq 50); do grep -q serving "$OUT" && break; sleep 0.1; done
PORT=$(head -1 "$OUT" | sed 's/.*:\([0-9]*\)\/$/\1/')
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - 127.0.0.1 "$PORT" "$N" <<'PY'
import ftplib, io, sys, time
ftp = ftplib.FTP()
ftp.connect(sys.argv[1], int(sys.argv[2]), timeout=20)
ftp.login("anonymous", "bench@")
ftp.voidcmd("TYPE I")
data = b"x" * 4096
ms = []
for i in range(int(sys.argv[3])):
    t = time.perf_counter()
    ftp.voidcmd("ALLO 4096")
    ftp.storbinary("STOR /lat-%d.dat" % i, io.BytesIO(data))
    ms.append((time.perf_counter() - t) * 1e3)
ftp.quit()
ms.sort()
n = len(ms)
print("STOR of 4 KiB with ALLO, %d files, ms: min %.2f median %.2f max %.2f" % (n, ms[0], ms[n // 2], ms[-1]))
print("fastest under 4.5 ms (no 5 ms wait after each file): %s" % ("yes" if ms[0] < 4.5 else "NO"))
PY
