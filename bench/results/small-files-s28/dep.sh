#!/bin/bash
# dep.sh F : depth.py on one tree upload, one floor tree, one one-file upload
. "$(dirname "$(readlink -f "$0")")/../small-files-s20/lib.sh"  # port, serve, warm (and waits out recent deletes)
F=$1; H=$(dirname "$(readlink -f "$0")"); R=/var/tmp/lead/s19/pairs-mixed/dep-$RANDOM; mkdir -p $R/srv
SRC=/var/tmp/lead/s19/pairs-mixed/src; ONE=/var/tmp/lead/s19/pairs-mixed/one
serve $F $R/srv
for row in tree floor one; do
  warm $SRC; warm $ONE; sync; sleep 1.5
  echo "== $row"
  case $row in
    tree) python3 $H/depth.py $F cp -q -r $SRC/ ftp://127.0.0.1:$PORT/t/ ;;
    floor) python3 $H/depth.py python3 $H/floor_tree.py $R/floor 32 ;;
    one) python3 $H/depth.py $F cp -q -r $ONE/ ftp://127.0.0.1:$PORT/o/ ;;
  esac
done
kill $SPID; find $R -type f -exec truncate -s 0 {} +
