# Sourced by ab.sh, cc.sh and prof.sh: what their rounds share (sourcing it waits out recent deletes).
# The source trees are the ones bench/results/small-files-s19-direct/pairs.py makes under $WORK.

# A free loopback port.
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

# CPU seconds (user + system) process $1 has used so far.
cpu() { awk '{printf "%.2f", ($14+$15)/100}' /proc/$1/stat; }

# serve FERRY ROOT [FLAGS...]: an anonymous-write server on a free port; sets PORT and SPID.
serve() {
  local f=$1 root=$2; shift 2
  PORT=$(port)
  $f serve $root --listen 127.0.0.1:$PORT --anonymous write "$@" >/dev/null 2>&1 & SPID=$!
  sleep 1
}

# warm DIR: reads DIR's files (untimed). This machine's DAMON pages out page cache it sees idle (at
# most 128 MiB/s): the 256 KiB tree's source was 93 % resident 20 s after a run and 83 % after 80 s
# (session 24), and the client's reads of the rest waited for the disk beside the server's writes.
warm() { find "$1" -type f -exec cat {} + > /dev/null; }

# row LABEL SERVER_PID COMMAND...: runs COMMAND after the page cache is written back and appends
# "LABEL wall (server CPU)" to $line (and FAIL if it failed). The command's source is warmed first
# when $SRC is set.
row() {
  local label=$1 s=$2 c0 t0 t1 c1; shift 2
  [ -n "${SRC:-}" ] && warm "$SRC"
  sleep 1.5; sync
  c0=$(cpu $s); t0=$(date +%s.%N)
  "$@" >/dev/null 2>&1 || line="$line FAIL"
  t1=$(date +%s.%N); c1=$(cpu $s)
  line="$line $label $(printf %.3f $(echo "$t1-$t0"|bc)) ($(echo "$c1-$c0"|bc))"
}

# The next round's order: the first row goes last.
rotate() { echo "${1#* } ${1%% *}"; }

# ext4 without a journal will not reuse an inode freed in the last 60 s, or 360 s while its
# inode-table block is dirty (ialloc.c, recently_deleted), and creates scan past them: every
# script that deletes stamps $WORK/.deleted (as pairs.py does), and each waits for it first.
STAMP=${WORK:-/var/tmp/lead/s19}/.deleted
wait_deletes() {
  [ -e "$STAMP" ] || return 0
  local left=$(( 370 - ($(date +%s) - $(stat -c %Y "$STAMP")) ))
  if [ $left -gt 0 ]; then echo "waiting $left s after the last deletes" >&2; sleep $left; fi
}
# KEEP=1 keeps them (truncated), so that the next script need not wait out the window: delete
# them with `deleted` when the series ends.
deleted() { if [ -n "${KEEP:-}" ]; then echo "kept $*" >&2; else rm -rf "$@"; touch "$STAMP"; fi; }
wait_deletes
