#!/bin/bash
# ab.sh FERRY_A "FLAGS_A" FERRY_B "FLAGS_B" ROUNDS [TREE]: tree upload walls, server A vs B, and one file on A, rotated
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.
set -u
. "$(dirname "$0")/../small-files-s20/lib.sh"
FA=$1; GA=$2; FB=$3; GB=$4; N=$5; T=${6:-256k}
W=${WORK:-/var/tmp/lead/s19}/pairs-$T
R=${SCRATCH:-/var/tmp}/abroot.$$; mkdir -p $R/a $R/b
serve $FA $R/a $GA; PA=$PORT; SA=$SPID
serve $FB $R/b $GB; PB=$PORT; SB=$SPID
rows="a b"
for i in $(seq 1 $N); do
  line="round $i:"
  for r in $rows; do
    case $r in a) F=$FA; P=$PB; S=$SB; src=$W/src/;; b) F=$FB; P=$PA; S=$SA; src=$W/src/;; one) F=$FA; P=$PA; S=$SA; src=$W/one/;; esac
    row $r $S $F cp --no-resume -q -r $src ftp://127.0.0.1:$P/$r$i/
  done
  find $R -type f -exec truncate -s 0 {} +
  rows=$(rotate "$rows")
  echo "$line"
done
kill $SA $SB; wait $SA $SB 2>/dev/null
deleted $R
