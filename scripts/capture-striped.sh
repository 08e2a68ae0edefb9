#!/bin/bash
# Captures globus-url-copy -stripe dialogues against the Globus striped
# server (front end -r node1,node2; data nodes -dn), all as nobody on loopback.
set -u
OUT=${1:-crates/cli/tests/fixtures/globus-striped}
mkdir -p $OUT
W=$(mktemp -d /tmp/i20/gw.XXXX); chmod 755 $W; chown nobody:nogroup $W
head -c 5000000 /dev/urandom > $W/src.bin; chown nobody:nogroup $W/src.bin
run() { setpriv --reuid=nobody --regid=nogroup --init-groups "$@"; }
P1=29711; P2=29712; PF=29710
run globus-gridftp-server -c /dev/null -aa -dn -p $P1 -control-interface 127.0.0.1 -data-interface 127.0.0.1 -d all -log-module stdio:buffer=0:interval=0 -l $W/dn1.log >/dev/null 2>&1 & D1=$!
run globus-gridftp-server -c /dev/null -aa -dn -p $P2 -control-interface 127.0.0.1 -data-interface 127.0.0.1 -d all -log-module stdio:buffer=0:interval=0 -l $W/dn2.log >/dev/null 2>&1 & D2=$!
sleep 1
run globus-gridftp-server -c /dev/null -aa -p $PF -r 127.0.0.1:$P1,127.0.0.1:$P2 -control-interface 127.0.0.1 -data-interface 127.0.0.1 -d all -log-module stdio:buffer=0:interval=0 -l $W/fe.log >/dev/null 2>&1 & F=$!
sleep 1
S=ftp://127.0.0.1:$PF
echo "== put" ; timeout 60 globus-url-copy -stripe -dbg -vb file://$W/src.bin $S$W/put.bin > $OUT/put.client-dbg.txt 2>&1; echo rc=$?
cmp $W/src.bin $W/put.bin && echo put-identical
echo "== get" ; timeout 60 globus-url-copy -stripe -dbg -vb $S$W/src.bin file://$W/get.bin > $OUT/get.client-dbg.txt 2>&1; echo rc=$?
cmp $W/src.bin $W/get.bin && echo get-identical
echo "== 3rd" ; timeout 60 globus-url-copy -stripe -dbg -vb $S$W/src.bin $S$W/tp.bin > $OUT/thirdparty.client-dbg.txt 2>&1; echo rc=$?
cmp $W/src.bin $W/tp.bin && echo tp-identical
echo "== 3rd -p 2 blocksize" ; timeout 60 globus-url-copy -stripe -p 2 -sbs 262144 -dbg $S$W/src.bin $S$W/tp2.bin > $OUT/thirdparty-p2-sbs.client-dbg.txt 2>&1; echo rc=$?
cmp $W/src.bin $W/tp2.bin && echo tp2-identical
kill $F $D1 $D2; sleep 0.5
cp $W/fe.log $OUT/frontend.server-log.txt; cp $W/dn1.log $OUT/datanode1.server-log.txt; cp $W/dn2.log $OUT/datanode2.server-log.txt
ls -la $OUT; rm -rf $W
