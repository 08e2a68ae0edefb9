#!/usr/bin/env bash
# What making the mixed tree's 1,000 MB durable costs on this machine's
# disk: the floor under every row that syncs (Ferry's tree and one-file
# rows) and not under rows that do not (Globus, lftp and rclone downloads).
# Four writers of 250 MB each, 1 MiB writes, timed whole (fio's own
# runtime leaves out the end_fsync).
# usage: device.sh DIR [ROUNDS]   (DIR on the benchmark's file system)
set -euo pipefail
dir=${1:?DIR}; rounds=${2:-3}
mkdir -p "$dir"
for r in $(seq 1 "$rounds"); do
  for mode in direct buffered-fsync buffered; do
    case $mode in
      direct) extra="--direct=1" ;;
      buffered-fsync) extra="--direct=0 --end_fsync=1" ;;
      buffered) extra="--direct=0" ;;
    esac
    start=$(date +%s.%N)
    fio --name="$mode" --directory="$dir" --rw=write --bs=1M --size=250M --numjobs=4 \
      --ioengine=psync --output-format=terse $extra > /dev/null
    end=$(date +%s.%N)
    rm -f "$dir"/"$mode".*
    sync -f "$dir"
    printf 'round %s %-15s 1000 MB in %.2f s\n' "$r" "$mode" "$(awk "BEGIN{print $end - $start}")"
  done
done
