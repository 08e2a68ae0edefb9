#!/bin/bash
# 20 runs of the flake test; odd runs under bounded CPU+disk load we start ourselves.
cd /work/wt/s11-small
T=/var/tmp/s11-small-flake/trees-bin2
for i in $(seq 1 ${RUNS:-20}); do
  pids=""
  if [ $((i % 2)) = 1 ]; then
    for k in 1 2 3; do timeout 120 sh -c 'while :; do :; done' & pids="$pids $!"; done
    timeout 120 sh -c 'while :; do dd if=/dev/zero of=/var/tmp/s11-small-flake/junk bs=1M count=300 conv=fsync status=none; done' & pids="$pids $!"
  fi
  s=$(date +%s.%N)
  timeout 300 $T --exact an_interrupted_tree_copy_resumes_file_by_file --nocapture > /var/tmp/s11-small-flake/run3-$i.log 2>&1
  rc=$?
  e=$(date +%s.%N)
  for p in $pids; do kill $p 2>/dev/null; done; wait $pids 2>/dev/null
  echo "run $i loaded=$((i % 2)) rc=$rc secs=$(echo "$e - $s" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
done
rm -f /var/tmp/s11-small-flake/junk
echo finished
