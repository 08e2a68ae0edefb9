#!/bin/bash
# run.sh FERRY TAG: one upload of local/src into root/TAG, server log to TAG.log
F=$1; T=$2; PORT=$((20000 + RANDOM % 20000))
$F serve /var/tmp/s15-up-t/root --listen 127.0.0.1:$PORT --anonymous write --log-format json > /var/tmp/s15-up-t/$T.log 2>&1 &
SPID=$!; sleep 1
/usr/bin/time -f "$T wall %e" $F cp -r -q /var/tmp/s15-up-t/local/src/ ftp://anonymous@127.0.0.1:$PORT/$T/
kill $SPID; wait $SPID 2>/dev/null
python3 - /var/tmp/s15-up-t/$T.log <<'PY'
import json,sys
ms=[];n=0
for l in open(sys.argv[1]):
    try: v=json.loads(l)
    except: continue
    f=v.get("fields",{})
    if f.get("message")=="batch durable": ms.append(f.get("ms",0)); n+=f.get("files",0)
print(f"passes {len(ms)} files {n} pass ms total {sum(ms):.0f} max {max(ms) if ms else 0:.0f}")
PY
