#!/usr/bin/env bash
# Benchmark 3's Ferry row by itself (bench/src/udt_bench.rs, loopback_row):
# a 1 GiB download from tmpfs to /dev/null over UDT on loopback, the
# bench's exact flags, with the server's and the client's CPU recorded.
#   run.sh FERRY TAG OUTDIR PORT [MODE]
# MODE stat (default): perf stat of cpu-clock, context switches and the
#   data path's system calls, both processes.
# MODE record: perf record -e cpu-clock -g of both processes (TAG.{server,client}.perf.data).
# Source: /dev/shm/s13-drv-cpu/data-1073741824.bin (made if missing).
set -euo pipefail
ferry=$1 tag=$2 out=$3 port=$4 mode=${5:-stat}
cc=${CC:-ferry}
mkdir -p "$out" /dev/shm/s13-drv-cpu
src=/dev/shm/s13-drv-cpu/data-1073741824.bin
[ -f "$src" ] || head -c $((1 << 30)) /dev/urandom > "$src"
"$ferry" serve /dev/shm/s13-drv-cpu --listen 127.0.0.1:$port --anonymous read --congestion "$cc" > "$out/$tag.serve.log" 2>&1 &
spid=$!
sleep 1
ev=cpu-clock,context-switches,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_recvmmsg,syscalls:sys_enter_ppoll,syscalls:sys_enter_futex,syscalls:sys_enter_write,syscalls:sys_enter_read,syscalls:sys_enter_sendfile64
if [ "$mode" = record ]; then
  perf record -q -e cpu-clock -g -p $spid -o "$out/$tag.server.perf.data" 2>/dev/null &
  ppid=$!
  sleep 0.5
  FERRY_PATH_CACHE=off perf record -q -e cpu-clock -g -o "$out/$tag.client.perf.data" -- \
    "$ferry" cp --json --transport udt --congestion "$cc" "ftp://127.0.0.1:$port/data-1073741824.bin" /dev/null > "$out/$tag.json" 2>"$out/$tag.client.err"
else
  perf stat -e $ev -p $spid -o "$out/$tag.server.stat" &
  ppid=$!
  sleep 0.5
  FERRY_PATH_CACHE=off perf stat -e $ev -o "$out/$tag.client.stat" -- \
    "$ferry" cp --json --transport udt --congestion "$cc" "ftp://127.0.0.1:$port/data-1073741824.bin" /dev/null > "$out/$tag.json" 2>"$out/$tag.client.err"
fi
sleep 0.3
kill -INT $ppid; wait $ppid || true
kill $spid; wait $spid 2>/dev/null || true
python3 "$(dirname "$0")/summary.py" "$out" "$tag"
