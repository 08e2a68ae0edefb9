#!/bin/bash
# The page cache's write speed on this machine, round after round: the same
# 500 MB written by dd into a fresh file of the work directory's file
# system, nothing else running. Usage: ddprobe.sh ROUNDS [DIR]
set -u
R=$1; D=${2:-/var/tmp/ddprobe.$$}; mkdir -p $D
for i in $(seq 1 $R); do
  sleep 3
  /usr/bin/time -f "round $i: %e s wall, %S s system" dd if=/dev/zero of=$D/f$i bs=1M count=500 2>&1 | grep round
done
grep -E "MemFree|^Cached" /proc/meminfo
rm -rf $D
