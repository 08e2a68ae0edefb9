#!/bin/bash
# bounded: N runs of the encrypted resume test (and the clear twin)
N=${1:-20}; OUT=${2:-/var/tmp/s10-drv-loop/quiet}
mkdir -p $OUT
for i in $(seq 1 $N); do
  for t in a_killed_encrypted_udt_upload_resumes_from_its_restart_markers a_killed_udt_upload_resumes_from_its_restart_markers; do
    timeout 120 /work/wt/s10-drv/target/debug/deps/udt_transport-707888c97f3d9978 --exact $t --nocapture > $OUT/$t-$i.log 2>&1; rc=$?
    echo "$i $t rc=$rc $(grep -o 'DIAG moved [0-9]* held [0-9]*' $OUT/$t-$i.log | head -1) load $(cut -d' ' -f1 /proc/loadavg)"
  done
done
