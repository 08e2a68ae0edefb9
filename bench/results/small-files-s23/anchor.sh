#!/bin/bash
# anchor.sh FERRY ROUNDS [TREE]: the disk's anchor for a tree upload, in the same rounds as Ferry's.
# Per round, rotated: Ferry's tree upload and one-file upload to a fresh `ferry serve` (loopback),
# and fio writing the same bytes to the same file system with O_DIRECT, as 2000 files of 256 KiB
# created on open (16 writers, as Ferry's 8 lines of 2 ring writers; and one writer with 16 writes
# queued through io_uring) and as one file in 4 MiB writes. Prints "label wall (server CPU)".
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.
set -u
. "$(dirname "$0")/../small-files-s20/lib.sh"
F=$1; N=$2; T=${3:-256k}
W=${WORK:-/var/tmp/lead/s19}/pairs-$T
R=${SCRATCH:-/var/tmp}/anchor.$$; mkdir -p $R/srv $R/fio
serve $F $R/srv
FILES=$(find $W/src -type f | wc -l); SIZE=$(stat -c %s $(find $W/src -type f | head -1))
fio_row() { # label DIR fio-args...
  local label=$1 d=$2; shift 2; mkdir -p $d
  sleep 1.5; sync
  # fio's own run time (its start-up, a quarter of a second here, left out).
  local ms=$(fio --name=$label --directory=$d --rw=write --direct=1 --group_reporting "$@" 2>&1 | sed -n 's/.*WRITE:.* run=\([0-9]*\)-.*/\1/p')
  [ -n "$ms" ] || { line="$line FAIL"; ms=0; }
  line="$line $label $(printf %.3f $(echo "$ms/1000"|bc -l)) (-)"
}
rows="tree one fio16 fiouring fioone"
for i in $(seq 1 $N); do
  line="round $i:"
  for r in $rows; do
    case $r in
      tree) row tree $SPID $F cp --no-resume -q -r $W/src/ ftp://127.0.0.1:$PORT/t$i/ ;;
      one) row one $SPID $F cp --no-resume -q -r $W/one/ ftp://127.0.0.1:$PORT/o$i/ ;;
      fio16) fio_row fio16 $R/fio/a$i --ioengine=psync --numjobs=16 --nrfiles=$((FILES/16)) --filesize=$SIZE \
               --size=$((FILES/16*SIZE)) --bs=$SIZE --fallocate=native --create_on_open=1 --file_service_type=sequential ;;
      fiouring) fio_row fiouring $R/fio/b$i --ioengine=io_uring --iodepth=16 --numjobs=1 --nrfiles=$FILES --filesize=$SIZE \
               --size=$((FILES*SIZE)) --bs=$SIZE --fallocate=native --create_on_open=1 --file_service_type=sequential ;;
      fioone) fio_row fioone $R/fio/c$i --ioengine=psync --bs=4M --size=$((FILES*SIZE)) --fallocate=native ;;
    esac
  done
  # Truncated, not deleted: freed inodes would slow the next round's creates (lib.sh).
  find $R -type f -exec truncate -s 0 {} +
  rows=$(rotate "$rows")
  echo "$line"
done
kill $SPID; wait $SPID 2>/dev/null
deleted $R
