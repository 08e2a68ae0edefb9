#!/usr/bin/env bash
# Time to the first data of a cold `ferry cp --transport udt` download on a
# ferry-wan link (namespaces NS-c / NS-s, server at 10.77.0.2:PORT), from the
# client's strace: execve -> connect, -> login write, -> set-up write,
# -> first UDT handshake datagram sent, -> first ACK sent (the receiver
# ACKs on its 10 ms SYN timer after the first data packet).
#   ttfb.sh FERRY NS PORT OUTDIR TAG
set -euo pipefail
ferry=$1 ns=$2 port=$3 out=$4 tag=$5
mkdir -p "$out"
st="$out/$tag.strace"
ip netns exec "$ns-c" env FERRY_PATH_CACHE=off timeout 60 strace -f -tt -e trace=execve,connect,sendto,sendmsg -s 200 -o "$st" \
  "$ferry" cp --json --transport udt --congestion ferry "ftp://10.77.0.2:$port/file.bin" /dev/null > "$out/$tag.json" 2> "$out/$tag.err" || true
python3 - "$st" "$tag" <<'PY'
import re, sys
def t(line):
    h, m, s = line.split()[1].split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)
lines = open(sys.argv[1]).read().splitlines()
t0 = t(lines[0])
ev = {}
for l in lines:
    if "connect(" in l and "htons" in l and "connect" not in ev: ev["connect"] = t(l)
    if "sendto(" in l and "USER " in l and "login" not in ev: ev["login"] = t(l)
    if "sendto(" in l and "RETR " in l and "retr" not in ev: ev["retr_sent"] = t(l)
    if "sendmsg(" in l and 'iov_base="\\200\\0' in l and "hs" not in ev: ev["udt_hs1"] = t(l); ev["hs"] = 1
    if "sendmsg(" in l and 'iov_base="\\200\\2' in l and "ack" not in ev: ev["first_ack"] = t(l); ev["ack"] = 1
    if "sendto(" in l and "QUIT" in l: ev["quit"] = t(l)
out = {k: round((v - t0) * 1000) for k, v in ev.items() if k not in ("hs", "ack")}
print(sys.argv[2], " ".join(f"{k}={v}ms" for k, v in out.items()))
PY
