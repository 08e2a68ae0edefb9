#!/bin/bash
cd /work/wt/s12-small
B=/var/tmp/s12-small-bin
$B/ferry-small-files --ferry $B/b/ferry --ferry-old /var/tmp/old-s12/ferry --delays 0 --trees 4k,256k,mixed --rows ferry,one-file,guc-pp-cc8,guc-pp-cc4 --scale 1 --time-limit 20 --work /var/tmp/s12-small-2 --out bench/results/small-files-s12-2 > $B/run2.log 2>&1
$B/ferry-small-files --ferry /var/tmp/old-s12/ferry --ferry-old $B/b/ferry --delays 0 --trees 4k,256k,mixed --rows ferry,one-file,guc-pp-cc8,guc-pp-cc4 --scale 1 --time-limit 20 --work /var/tmp/s12-small-3 --out bench/results/small-files-s12-3-swapped > $B/run3.log 2>&1
$B/ferry-small-files --ferry $B/b/ferry --ferry-old /var/tmp/old-s12/ferry --delays 1 --trees 4k,256k,mixed --rows ferry,one-file,guc-pp-cc8 --scale 4 --time-limit 20 --work /var/tmp/s12-small-1ms --out bench/results/small-files-s12-1ms > $B/run1ms.log 2>&1
echo ALLDONE >> $B/run1ms.log
