#!/bin/bash
# Usage: run-fresh.sh [REPS] [SIZES] -- as run.sh, but every run in a freshly made ext4
# (mkfs.ext4 -O ^has_journal, 1 GiB image file under /var/tmp, loop-mounted): no
# recently deleted inodes, no other helper's files in the way.
set -eu
R=${1:-3}; SIZES=${2:-4096}
B=/var/tmp/s15-fs-fsmicro; IMG=/var/tmp/s15-fs-img; M=/var/tmp/s15-fs-mnt
rustc -O --edition 2021 -o $B "$(dirname "$0")/fsmicro.rs"
mkdir -p $M
for rep in $(seq $R); do
  for size in $SIZES; do
    n=$(( size > 65536 ? 2000 : 20000 ))
    for t in 1 2 4; do
      for w in partial tmpfile tmpfile-empty hidden batched inplace; do
        rm -f $IMG; truncate -s 1G $IMG; mkfs.ext4 -q -F -O ^has_journal $IMG; mount -o loop $IMG $M
        echo "rep=$rep load=$(cut -d' ' -f1 /proc/loadavg) $($B $M $w $t $n $size)"
        umount $M
      done
    done
  done
done
rm -f $IMG
