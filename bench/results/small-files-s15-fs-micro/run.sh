#!/bin/bash
# Usage: run.sh [DIR] [REPS]  -- every way x 1/2/4 writer threads, 20,000 x 4 KiB, interleaved reps.
set -eu
D=${1:-/var/tmp/s15-fs-micro}; R=${2:-2}
B=/var/tmp/s15-fs-fsmicro
rustc -O --edition 2021 -o $B "$(dirname "$0")/fsmicro.rs"
mkdir -p $D
for rep in $(seq $R); do
  for t in 1 2 4; do
    for w in partial tmpfile tmpfile-empty hidden batched inplace; do
      sync
      echo "rep=$rep load=$(cut -d' ' -f1 /proc/loadavg) $($B $D $w $t)"
    done
  done
done
rm -rf $D/t-*
