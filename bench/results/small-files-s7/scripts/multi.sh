#!/bin/bash
# run inside ferry-wan up: several traces, one per EXTRA variant, F binary
for v in "$@"; do
  tag=$(echo "$v" | tr -c 'a-z0-9' '_')
  EXTRA="$v" D=/var/tmp/i18s7/tr/$RUN-$tag NS=$NS /var/tmp/i18s7/tr/trace.sh > /dev/null
  python3 -c "
import json,sys;d=json.load(open('/var/tmp/i18s7/tr/$RUN-$tag/cp.json'));print('$RUN','$v', 'files',d['files'],'s %.2f'%d['seconds'],'sync %.2f'%d['sync_seconds'], d['concurrency']['reason'][:40])"
  cat /var/tmp/i18s7/tr/$RUN-$tag/time.txt
done
