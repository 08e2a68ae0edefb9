#!/usr/bin/env bash
# wbt_pairs.sh FERRY ROUNDS: the mixed tree's upload and the same bytes as one file, each with the
# block layer's writeback throttling on (vda's wbt_lat_usec as found) and off (0), rows rotated;
# restores the setting at the end. Outputs truncated after each row.
set -u
F=$1; R=$2; Q=/sys/block/vda/queue/wbt_lat_usec; OLD=$(cat $Q); trap "echo $OLD > $Q" EXIT
W=/var/tmp/lead/s19/pairs-mixed; D=$W/wbt-$RANDOM; mkdir -p $D
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$F serve $D --listen 127.0.0.1:$port --anonymous write >/dev/null 2>&1 & spid=$!; sleep 1
rows=(tree:$OLD tree:0 one:$OLD one:0)
for r in $(seq 0 $((R-1))); do
  line="round $r:"
  for k in 0 1 2 3; do
    row=${rows[$(( (k + r) % 4 ))]}; what=${row%%:*}; lat=${row##*:}
    s=$W/src; [ $what = one ] && s=$W/one
    cat $s/* > /dev/null; sync; sleep 1.5; echo $lat > $Q
    t0=$(date +%s.%N); $F cp --json --no-resume -q -r $s/ ftp://127.0.0.1:$port/$what-$lat-$r/ > /dev/null; t1=$(date +%s.%N)
    echo $OLD > $Q
    line="$line $what(wbt $lat) $(echo "$t1 - $t0" | bc | cut -c1-5)"
    find $D -type f -exec truncate -s 0 {} +
  done
  echo "$line"
done
kill $spid
