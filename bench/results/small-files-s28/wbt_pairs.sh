#!/usr/bin/env bash
# wbt_pairs.sh FERRY ROUNDS: the mixed tree's upload and the same bytes as one file, each with the
# block layer's writeback throttling on (vda's wbt_lat_usec as found) and off (0), rows rotated;
# restores the setting at the end. Outputs truncated after each row.
set -u
. "$(dirname "$(readlink -f "$0")")/../small-files-s20/lib.sh"  # port, serve, warm (and waits out recent deletes)
F=$1; R=$2; Q=/sys/block/vda/queue/wbt_lat_usec; OLD=$(cat $Q); trap "echo $OLD > $Q" EXIT
W=/var/tmp/lead/s19/pairs-mixed; D=$W/wbt-$RANDOM; mkdir -p $D
serve $F $D
rows=(tree:$OLD tree:0 one:$OLD one:0)
for r in $(seq 0 $((R-1))); do
  line="round $r:"
  for k in 0 1 2 3; do
    row=${rows[$(( (k + r) % 4 ))]}; what=${row%%:*}; lat=${row##*:}
    s=$W/src; [ $what = one ] && s=$W/one
    warm $s; sync; sleep 1.5; echo $lat > $Q
    t0=$(date +%s.%N); $F cp --json --no-resume -q -r $s/ ftp://127.0.0.1:$PORT/$what-$lat-$r/ > /dev/null; t1=$(date +%s.%N)
    echo $OLD > $Q
    line="$line $what(wbt $lat) $(echo "$t1 - $t0" | bc | cut -c1-5)"
    find $D -type f -exec truncate -s 0 {} +
  done
  echo "$line"
done
kill $SPID
