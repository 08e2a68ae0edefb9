#!/bin/bash
# Session 13: perf and strace -c of both ends, main's build (9031b3de), full scale, loopback.
cd $(dirname $0)
F=/var/tmp/old-s13/ferry
for c in "4k down" "4k up" "256k up"; do
  set -- $c
  [ -n "${TIME:-}" ] && ./prof.sh $F $1 $2 time time-$1-$2
  ./prof.sh $F $1 $2 perf perf-$1-$2
  ./prof.sh $F $1 $2 strace strace-$1-$2
done
