#!/usr/bin/env bash
# A tree copy interrupted with Ctrl-C three times at random moments, as a
# person at a terminal would, and re-run each time (issue 13's acceptance
# trial). Drives `ferry cp -r` inside tmux with send-keys, then checks:
#   * the result is byte-identical to the source,
#   * no nested directory (dst/tree/tree),
#   * no file was sent twice in full (the server's transfer log),
#   * the re-runs' summaries say what was resumed and skipped.
#
# Usage: scripts/trial-tree-ctrl-c.sh [FERRY_BINARY]
# Loopback only; bounded: 11 files, 122 MiB, rate-limited to 8 MB/s, each
# wait bounded. Exits 0 when every check passes.
set -euo pipefail

FERRY=${1:-}
if [[ -z "$FERRY" ]]; then
    for f in target/release/ferry target/debug/ferry; do
        [[ -x "$f" ]] && FERRY=$(realpath "$f") && break
    done
fi
[[ -x "${FERRY:-}" ]] || { echo "build ferry first (cargo build -p ferry) or pass its path" >&2; exit 2; }
command -v tmux >/dev/null || { echo "tmux is not installed (apt-get install tmux)" >&2; exit 2; }

WORK=$(mktemp -d /tmp/ferry-trial.XXXXXX)
SESSION="ferry-trial-$$"
SERVER_PID=
cleanup() {
    tmux kill-session -t "$SESSION" 2>/dev/null || true
    [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# The tree: a few big files (cut half-way) and some small ones.
mkdir -p "$WORK/src/tree/a" "$WORK/src/tree/b/c" "$WORK/root" "$WORK/state"
for i in 1 2 3 4 5; do head -c $((24 << 20)) /dev/urandom > "$WORK/src/tree/a/big$i.bin"; done
for i in 1 2 3 4 5 6; do head -c $((100000 * i)) /dev/urandom > "$WORK/src/tree/b/c/small$i.bin"; done

echo alice-trial-pw | "$FERRY" passwd --users "$WORK/users.toml" alice --write 2>/dev/null
"$FERRY" serve "$WORK/root" --users "$WORK/users.toml" --listen 127.0.0.1:0 --marker-interval 1 \
    --log-format json >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVER_PID=$!
for _ in $(seq 50); do grep -q serving "$WORK/serve.out" 2>/dev/null && break; sleep 0.1; done
PORT=$(sed -n 's/.*on ftp:\/\/127\.0\.0\.1:\([0-9]*\)\/.*/\1/p' "$WORK/serve.out" | head -1)
[[ -n "$PORT" ]] || { echo "the server did not start" >&2; cat "$WORK/serve.log" >&2; exit 1; }

CMD="FERRY_PASSWORD=alice-trial-pw FERRY_STATE_DIR=$WORK/state $FERRY cp -r -p 2 --max-rate 8M $WORK/src/tree ftp://alice@127.0.0.1:$PORT/dst; echo EXIT=\$?"
tmux new-session -d -s "$SESSION" -x 200 -y 50 "bash --norc --noprofile"
pane() { tmux capture-pane -p -J -S -200 -t "$SESSION"; }
exits() { pane | grep -c '^EXIT=' || true; }
wait_exit() { # wait until the pane shows $1 EXIT= lines
    for _ in $(seq 600); do [[ $(exits) -ge $1 ]] && return 0; sleep 0.1; done
    echo "no EXIT line after 60 s" >&2; pane >&2; exit 1
}

runs=0
for round in 1 2 3; do
    tmux send-keys -t "$SESSION" "$CMD" Enter
    # A random moment between 1 and 3 s into the copy.
    sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.2f", 1 + (r % 2000) / 1000 }')"
    tmux send-keys -t "$SESSION" C-c
    runs=$((runs + 1)); wait_exit $runs
    echo "--- Ctrl-C $round:"; pane | grep -E '^(ferry|EXIT)' | tail -3
done
tmux send-keys -t "$SESSION" "$CMD" Enter
runs=$((runs + 1)); wait_exit $runs
echo "--- final run:"; pane | grep -E '^(ferry|EXIT)' | tail -2
final=$(pane | grep -E '^(ferry: copied|EXIT)' | tail -2)

fail=0
check() { if eval "$2"; then echo "ok:   $1"; else echo "FAIL: $1"; fail=1; fi; }
check "the three interrupted runs exit 130" '[[ $(pane | grep -c "^EXIT=130") -eq 3 ]]'
check "the last run exits 0" '[[ "$final" == *"EXIT=0"* ]]'
check "byte-identical" 'diff <(cd "$WORK/src/tree" && find . -type f -exec sha256sum {} + | sort -k2) \
                             <(cd "$WORK/root/dst/tree" && find . -type f -exec sha256sum {} + | sort -k2) >/dev/null'
check "no nested directory" '[[ ! -e "$WORK/root/dst/tree/tree" && ! -e "$WORK/root/dst/dst" ]]'
check "the re-runs say what was resumed" '[[ $(pane | grep -c "resumed from where an earlier copy stopped") -ge 1 ]]'
check "and what was already there" '[[ $(pane | grep -c "already complete at the destination") -ge 1 ]]'
twice=$(python3 - "$WORK/serve.log" "$WORK/src/tree" <<'EOF'
import json, os, sys, collections
full = collections.Counter()
for line in open(sys.argv[1]):
    try:
        f = json.loads(line)["fields"]
    except Exception:
        continue
    if f.get("message") == "transfer finished" and f.get("direction") == "receive" and f.get("status") == "complete":
        rel = f["path"].split("/dst/tree/", 1)[1]
        if f["bytes"] == os.path.getsize(os.path.join(sys.argv[2], rel)) and f["bytes"] > 0:
            full[rel] += 1
print(" ".join(p for p, n in full.items() if n > 1))
EOF
)
check "no file sent twice in full" '[[ -z "$twice" ]]'
check "no partial files left" '[[ -z "$(find "$WORK/root" -name "*.ferry-part")" ]]'
exit $fail
