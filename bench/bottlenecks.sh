#!/usr/bin/env bash
# The induced-bottleneck suite, long version (issue 14): eight bottlenecks
# created on purpose (network path rate, loss, receiver window, CPU, disk
# write, disk read, page-cache copy, sender buffer), each profiled with
# `ferry profile` three times; the verdicts go to
# bench/results/bottlenecks.md (and its figure, bottlenecks.svg).
#
#   bench/bottlenecks.sh                 # 8 cases x 3 repetitions
#   bench/bottlenecks.sh --case 3,8      # some cases
#   bench/bottlenecks.sh --reps 1 --verbose --keep   # every candidate's score; keep the reports
#
# Needs root (network namespaces, cgroup v1 cpu and blkio, loop devices).
# It changes nothing it does not undo: namespaces, cgroups and loop devices
# are removed and net.ipv4.tcp_allowed_congestion_control is restored, also
# on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/bottlenecks.sh: must run as root: sudo bench/bottlenecks.sh $*" >&2
  exit 1
fi
bench/deps.sh
cargo build --release --quiet -p ferry -p ferry-bench
target="${CARGO_TARGET_DIR:-target}"
# The full run (8 cases x 3) writes bottlenecks.md; fewer repetitions
# write bottlenecks-reps-N.md, a subset of cases bottlenecks-partial.md, so a
# short run never replaces the full table.
results=bench/results/bottlenecks.md
prev=
for a in "$@"; do
  case "$prev" in --reps) [ "$a" = 3 ] || results=bench/results/bottlenecks-reps-$a.md ;; esac
  case "$a" in --reps=*) [ "${a#--reps=}" = 3 ] || results=bench/results/bottlenecks-reps-${a#--reps=}.md ;; esac
  prev=$a
done
for a in "$@"; do
  case "$a" in --case | --case=*) results=bench/results/bottlenecks-partial.md ;; esac
done
export FERRY_BOTTLENECKS_COMMAND="bench/bottlenecks.sh${*:+ $*}"
exec "$target/release/ferry-bottlenecks" --ferry "$target/release/ferry" --results "$results" "$@"
