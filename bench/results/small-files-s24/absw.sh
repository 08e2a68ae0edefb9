#!/bin/bash
# ab.sh FERRY_A "FLAGS_A" FERRY_B "FLAGS_B" ROUNDS [TREE]: tree upload walls, server A vs B, and one file
# on a third server of build A; a and b alternate first, one file last (until session 24: one file on A
# and a plain rotation, which made A the slower place)
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.
set -u
. "$(dirname "$0")/../small-files-s20/lib.sh"
FA=$1; GA=$2; FB=$3; GB=$4; N=$5; T=${6:-256k}
W=${WORK:-/var/tmp/lead/s19}/pairs-$T
R=${SCRATCH:-/var/tmp}/abroot.$$; mkdir -p $R
# One root for all three: with a root each, A/A runs read A 30 % slower than B (session 24),
# the roots' places on the disk, not the servers.
serve $FB $R $GB; PB=$PORT; SB=$SPID
serve $FA $R $GA; PA=$PORT; SA=$SPID
serve $FA $R $GA; PO=$PORT; SO=$SPID
rows="a b one"
for i in $(seq 1 $N); do
  line="round $i:"
  for r in $rows; do
    case $r in a) F=$FA; P=$PA; S=$SA; src=$W/src/;; b) F=$FB; P=$PB; S=$SB; src=$W/src/;; one) F=$FA; P=$PO; S=$SO; src=$W/one/;; esac
    row $r $S $F cp --no-resume -q -r $src ftp://127.0.0.1:$P/$r$i/
  done
  find $R -type f -exec truncate -s 0 {} +
  # a and b take turns at going first, one file last: each tree row follows the one-file row
  # (of the round before) equally often. The plain rotation put a there in two rounds of three.
  if [ "$rows" = "a b one" ]; then rows="b a one"; else rows="a b one"; fi
  echo "$line"
done
kill $SA $SB $SO; wait $SA $SB $SO 2>/dev/null
deleted $R
