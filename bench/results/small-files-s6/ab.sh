#!/bin/bash
# Old vs new `ferry cp -r` downloads of one tree, alternating, in one run
# (run inside `ferry-wan up --name NS ... -- ab.sh`).
# Env: OLD NEW (binaries), TREE, DATA, REPS, W (work dir), NS, DIR=down|up
OLD=${OLD:-/var/tmp/old-s6/ferry}; NEW=${NEW:-/var/tmp/i18s6/new/ferry}
TREE=${TREE:-5000x4KiB}; DATA=${DATA:-/var/tmp/sf-s5/data}; REPS=${REPS:-3}
W=${W:-/var/tmp/i18s6/ab}; NS=${NS:-i18t}; DIR=${DIR:-down}
mkdir -p $W
i=0; declare -A PORT
for b in old new; do
  eval F=\$${b^^}
  PORT[$b]=$((2131+i)); i=$((i+1))
  mkdir -p $W/srv-$b
  if [ $DIR = down ]; then
    ip netns exec $NS-s $F serve $DATA --listen 10.77.0.2:${PORT[$b]} --anonymous read > $W/serve-$b.log 2>&1 &
  else
    rm -rf $W/srv-$b; mkdir -p $W/srv-$b
    ip netns exec $NS-s $F serve $W/srv-$b --listen 10.77.0.2:${PORT[$b]} --anonymous write > $W/serve-$b.log 2>&1 &
  fi
  eval SP_$b=$!
done
sleep 1
for r in $(seq 1 $REPS); do
  for b in old new; do
    eval F=\$${b^^}
    load=$(cut -d' ' -f1 /proc/loadavg)
    if [ $DIR = down ]; then
      rm -rf $W/dst; mkdir -p $W/dst
      /usr/bin/time -f "%e %U %S" -o $W/t.txt ip netns exec $NS-c $F cp --json --no-resume -q -r ftp://10.77.0.2:${PORT[$b]}/$TREE/ $W/dst/ > $W/cp-$b-$r.json 2> $W/cp-$b-$r.log
      rc=$?; n=$(find $W/dst -type f -not -name '.*' | wc -l)
    else
      rm -rf $W/srv-$b/$TREE
      /usr/bin/time -f "%e %U %S" -o $W/t.txt ip netns exec $NS-c $F cp --json --no-resume -q -r $DATA/$TREE/ ftp://anonymous@10.77.0.2:${PORT[$b]}/$TREE/ > $W/cp-$b-$r.json 2> $W/cp-$b-$r.log
      rc=$?; n=$(find $W/srv-$b/$TREE -type f -not -name '.*' | wc -l)
    fi
    read wall user sys < $W/t.txt
    echo "rep=$r build=$b dir=$DIR tree=$TREE rc=$rc files=$n wall_s=$wall client_user_s=$user client_sys_s=$sys load1=$load"
  done
done
kill $SP_old $SP_new
