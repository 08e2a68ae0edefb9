#!/usr/bin/env bash
# Runs every fuzz target for a bounded time (default 60 s each) with
# libFuzzer; new interesting inputs land in fuzz/corpus/<target>/, which is
# committed and replayed on stable by crates/proto/tests/fuzz_corpus.rs.
#   scripts/fuzz.sh [seconds] [target...]
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
shift || true
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo +nightly fuzz list)
for t in "${targets[@]}"; do
  echo "== $t: ${secs}s" >&2
  cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -max_len=4096 2>&1 \
    | grep -E "^#[0-9]+.*(DONE|pulse)|Done [0-9]+ runs|ERROR|panicked" | tail -3
done
