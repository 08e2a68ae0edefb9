#!/bin/bash
# fiosync.sh ROUNDS: fio's 2,000 x 256 KiB direct writes by 16 writers, alone and with a syncfs
# (sync -f) of the same file system every 50 ms beside them (Ferry's lines' durability passes).
R=/var/tmp/lead/s24/scratch/fiosync.$$; mkdir -p $R
f() { mkdir -p $2; fio --name=$1 --directory=$2 --rw=write --direct=1 --group_reporting --ioengine=psync --numjobs=16 --nrfiles=125 \
   --filesize=262144 --size=$((125*262144)) --bs=262144 --fallocate=native --create_on_open=1 --file_service_type=sequential 2>&1 \
   | sed -n 's/.*WRITE:.* run=\([0-9]*\)-.*/\1/p'; }
for i in $(seq 1 $1); do
  sleep 1.5; sync; a=$(f alone $R/a$i)
  sleep 1.5; sync
  ( while [ ! -e $R/stop ]; do sync -f $R; sleep 0.05; done ) & L=$!
  b=$(f synced $R/b$i); touch $R/stop; wait $L; rm $R/stop
  n=$(find $R/b$i -type f | wc -l)
  echo "round $i: alone ${a} ms, with syncfs every 50 ms ${b} ms ($n files)"
  find $R -type f -exec truncate -s 0 {} +
done
