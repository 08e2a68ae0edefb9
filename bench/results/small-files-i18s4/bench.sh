#!/bin/bash
# old (main 33b28ae, debug) then new (this branch, debug), same flags
cd /work/wt/i18-s4
B=/var/tmp/i18s4/ferry-small-files-main
for v in "$@"; do
  case $v in
    old) F=/var/tmp/i18s4/ferry-main-debug;;
    new*) F=/var/tmp/i18s4/ferry-$v;;
  esac
  echo "== $v $(date -u +%H:%M:%S) load: $(cat /proc/loadavg)"
  nice -n -5 $B --ferry $F --delays 0,1 --trees 4k,256k --directions upload --rows ferry,guc-pp-cc8 --scale 4 --time-limit 5 --work /var/tmp/i18s4/work-$v --out /var/tmp/i18s4/out-$v-$RUN
  echo "== end $v $(date -u +%H:%M:%S) load: $(cat /proc/loadavg)"
done
