#!/bin/bash
# dep.sh F : depth.py on one tree upload, one floor tree, one one-file upload
F=$1; H=/work/main/bench/results/small-files-s28; R=/var/tmp/lead/s19/pairs-mixed/dep-$RANDOM; mkdir -p $R/srv
SRC=/var/tmp/lead/s19/pairs-mixed/src; ONE=/var/tmp/lead/s19/pairs-mixed/one
port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
$F serve $R/srv --listen 127.0.0.1:$port --anonymous write >/dev/null 2>&1 & spid=$!
for row in tree floor one; do
  cat $SRC/* $ONE/* >/dev/null; sync; sleep 1.5
  echo "== $row"
  case $row in
    tree) python3 $H/depth.py $F cp -q -r $SRC/ ftp://127.0.0.1:$port/t/ ;;
    floor) python3 $H/depth.py python3 $H/floor_tree.py $R/floor 32 ;;
    one) python3 $H/depth.py $F cp -q -r $ONE/ ftp://127.0.0.1:$port/o/ ;;
  esac
done
kill $spid; find $R -type f -exec truncate -s 0 {} +
