#!/bin/bash
cd /work/wt/i18-s7
echo "new harness start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
nice -n -5 /var/tmp/i18s7/ferry-small-files-new --ferry /var/tmp/old-s7/ferry --delays 0,1 --trees 4k,256k,mixed --rows ferry,one-file,guc-pp-cc8 --scale 4 --time-limit 5 --work /var/tmp/sf-s7n --out /var/tmp/i18s7/ab/new 2>&1 | grep -v "^ *$"
echo "new harness end $(date -u +%H:%M:%S)"; sleep 35
echo "old harness start $(date -u +%H:%M:%S) load $(cut -d' ' -f1-3 /proc/loadavg)"
nice -n -5 /var/tmp/old-s7/ferry-small-files --ferry /var/tmp/old-s7/ferry --delays 0,1 --trees 4k,256k,mixed --rows ferry,one-file,guc-pp-cc8 --scale 4 --time-limit 5 --work /var/tmp/sf-s7o --out /var/tmp/i18s7/ab/old 2>&1 | grep -v "^ *$"
echo "old harness end $(date -u +%H:%M:%S)"
