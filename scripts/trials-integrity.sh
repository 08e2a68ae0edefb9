#!/usr/bin/env bash
# Integrity trials (issue 12), with the full counts; the test suite runs
# a few repetitions of each (crates/cli/tests/integrity.rs, `trial_*`).
#   1. paced stream-mode uploads (ftplib with and without ALLO, curl)
#      SIGKILLed at a random moment: none may be committed under its name;
#   2. pairs of concurrent `ferry cp -p 4` uploads of different files to
#      one name, plus a retry killed after 0.5 s beside a surviving copy:
#      no final file a mixture, every reported success on disk;
#   3. `ferry cp -p 4` uploads killed at a random moment: every re-run
#      byte-identical, resending at most 10 % more than was missing.
# Each is bounded (a few minutes). Prints the tallies and writes them to
# bench/results/integrity-trials.md.
#   scripts/trials-integrity.sh [killed-stream] [pairs] [killed-parallel]
# FERRY_TRIAL_SEED fixes the random moments.
set -euo pipefail
cd "$(dirname "$0")/.."
killed_stream=${1:-60}
pairs=${2:-10}
killed_parallel=${3:-20}
out=bench/results/integrity-trials.md
log=$(mktemp)
trap 'rm -f "$log"' EXIT
run() {
  local n=$1 test=$2
  echo "== $test x $n"
  FERRY_TRIALS=$n cargo test -j 2 -p ferry --test integrity "$test" -- --exact --nocapture 2>&1 | tee -a "$log"
}
status=0
run "$killed_stream" trial_killed_paced_stream_uploads || status=1
run "$pairs" trial_concurrent_uploads_to_one_name || status=1
run "$killed_parallel" trial_killed_parallel_uploads_resume || status=1
{
  echo "# Integrity trials (issue 12)"
  echo
  echo "Commit: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)');"
  echo "$(date -u +%Y-%m-%d); $(nproc) shared cores; debug build, loopback."
  echo
  echo "Command: \`scripts/trials-integrity.sh $killed_stream $pairs $killed_parallel\`"
  echo
  grep -E '^(TRIAL|random seed)' "$log" | sed 's/^/    /'
} >"$out"
echo
grep -E '^TRIAL' "$log"
echo "written to $out"
exit $status
