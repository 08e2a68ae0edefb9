#!/usr/bin/env bash
# Load test (issue 7): SESSIONS concurrent sessions (default 200) mixing
# logins, MLSD listings and verified uploads/downloads against one
# `ferry serve` for SECS seconds (default 60). Fails on any failed
# transfer or if the server's descriptors/threads do not return to their
# baseline; writes the figures to bench/results/load.md.
#   scripts/load.sh [sessions] [secs]
set -euo pipefail
cd "$(dirname "$0")/.."
sessions=${1:-200}
secs=${2:-60}
out=bench/results/load.md
cmd="FERRY_LOAD_SESSIONS=$sessions FERRY_LOAD_SECS=$secs cargo test --release -p ferry --test load -- --ignored --nocapture"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
FERRY_LOAD_SESSIONS=$sessions FERRY_LOAD_SECS=$secs \
  cargo test --release -j 2 -p ferry --test load -- --ignored --nocapture 2>&1 | tee "$log"
{
  echo "# Load: $sessions concurrent sessions for $secs s"
  echo
  echo "One \`ferry serve\` (release build, loopback, all sessions from 127.0.0.1 with"
  echo "\`--max-sessions-per-ip $((sessions + 56))\`), each session looping: connect, USER/PASS,"
  echo "MKD, STOR (4 KiB–1 MiB), MLSD, RETR compared byte for byte, QUIT."
  echo "Machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')), shared; $(date -u +%Y-%m-%d)."
  echo "Commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')."
  echo
  echo "Command: \`scripts/load.sh $sessions $secs\`, i.e. \`$cmd\`"
  echo
  echo "| measure | value |"
  echo "|---|---|"
  grep '^| ' "$log"
  echo
  echo "Descriptors and threads are read from /proc/PID/fd and /proc/PID/status"
  echo "(Threads) before the load (after one warm-up session and 12 s idle) and"
  echo "polled afterwards until back at or below the baseline (the tokio blocking"
  echo "pool's idle threads expire after 10 s). Peak RSS is VmHWM."
} > "$out"
echo "wrote $out" >&2
