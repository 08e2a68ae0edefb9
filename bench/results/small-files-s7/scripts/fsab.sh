#!/bin/bash
# inside ferry-wan up: ext4 vs tmpfs destination, alternating, same binary F
for r in 1 2; do
 for where in ext4 tmpfs; do
  if [ $where = tmpfs ]; then export DST=/dev/shm/i18s7-dst; else export DST=/var/tmp/i18s7/dst; fi
  load=$(cut -d' ' -f1 /proc/loadavg)
  D=/var/tmp/i18s7/tr/$RUN-$where-$r NS=$NS /var/tmp/i18s7/tr/trace.sh > /dev/null
  python3 -c "
import json;d=json.load(open('/var/tmp/i18s7/tr/$RUN-$where-$r/cp.json'));print('$RUN rep $r $where','files',d['files'],'s %.2f'%d['seconds'],'files/s %.0f'%(d['files']/d['seconds']),'sync %.2f'%d['sync_seconds'],'load $load', end=' ')"
  cat /var/tmp/i18s7/tr/$RUN-$where-$r/time.txt
 done
done
rm -rf /dev/shm/i18s7-dst /var/tmp/i18s7/dst
