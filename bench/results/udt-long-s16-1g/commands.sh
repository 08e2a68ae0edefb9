### /var/tmp/s16-mss/bench1.sh
# s16-mss: benchmark 2 at 1 Gbit/s, 80 ms one way, 0 % (with the 256 MiB file), untuned hosts, MTU 9000.
set -euo pipefail
cd /work/wt/s16-mss
OUT=${OUT:-bench/results/udt-long-s16-1g}
exec timeout 1500 target/release/ferry-bench --ferry target/release/ferry \
  --scenario udt-long --rate-mbit 1000 --delays-ms 80 --losses-pct 0 --buffers untuned \
  --rows ferry-udt,ferry-tcp-p4,globus-p4,iperf3 --reps 2 --row-secs ${SECS:-20} \
  --ferry-old /var/tmp/old-s16/ferry --results "$OUT" --shm-dir /dev/shm/s16-mss --work-dir /var/tmp/s16-mss/work

### /var/tmp/s16-mss/bench2.sh
# s16-mss run 2: the 256 MiB file again, cold and at the path's rate, 10 s rows, new/old twins, Globus -p 4.
set -euo pipefail
cd /work/wt/s16-mss
exec timeout 900 target/release/ferry-bench --ferry target/release/ferry \
  --scenario udt-long --rate-mbit 1000 --delays-ms 80 --losses-pct 0 --buffers untuned \
  --rows ferry-udt,ferry-udt-rate,globus-p4 --reps 2 --row-secs 10 \
  --ferry-old /var/tmp/old-s16/ferry --results bench/results/udt-long-s16-1g-b --shm-dir /dev/shm/s16-mss --work-dir /var/tmp/s16-mss/work

### /var/tmp/s16-mss/bench3.sh
# s16-mss run 3: what the emulator carries at 1 Gbit/s, 80 ms, MTU 9000 (iperf3 with tuned 64 MiB buffers),
# then the 1 % and 5 % rows at 1 Gbit/s for information.
set -euo pipefail
cd /work/wt/s16-mss
timeout 300 target/release/ferry-bench --ferry target/release/ferry \
  --scenario udt-long --rate-mbit 1000 --delays-ms 80 --losses-pct 0 --buffers tuned \
  --rows iperf3,iperf3-bbr --reps 1 --row-secs 10 \
  --results bench/results/udt-long-s16-1g-iperf3 --shm-dir /dev/shm/s16-mss --work-dir /var/tmp/s16-mss/work
timeout 900 target/release/ferry-bench --ferry target/release/ferry \
  --scenario udt-long --rate-mbit 1000 --delays-ms 80 --losses-pct 1,5 --buffers untuned \
  --rows ferry-udt,globus-p4 --reps 1 --row-secs 20 \
  --ferry-old /var/tmp/old-s16/ferry --results bench/results/udt-long-s16-1g-loss --shm-dir /dev/shm/s16-mss --work-dir /var/tmp/s16-mss/work

### /var/tmp/s16-mss/bench4.sh
# s16-mss run 4: more repetitions of the cold 256 MiB file (10 s capped rows before it; the cap applies to the file too), new/old twins, Globus -p 4.
set -euo pipefail
cd /work/wt/s16-mss
exec timeout 600 target/release/ferry-bench --ferry target/release/ferry \
  --scenario udt-long --rate-mbit 1000 --delays-ms 80 --losses-pct 0 --buffers untuned \
  --rows ferry-udt,globus-p4 --reps 3 --row-secs 10 \
  --ferry-old /var/tmp/old-s16/ferry --results bench/results/udt-long-s16-1g-c --shm-dir /dev/shm/s16-mss --work-dir /var/tmp/s16-mss/work

### udt-table3-s16-mtu1500
target/release/ferry-bench --ferry target/release/ferry --scenario udt-table3 --paths rtt20 --rows ferry-udt --reps 1 --row-secs 25 --ferry-old /var/tmp/old-s16/ferry --results bench/results/udt-table3-s16-mtu1500 --shm-dir /dev/shm/s16-mss --work-dir /var/tmp/s16-mss/work
