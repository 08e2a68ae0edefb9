#!/usr/bin/env bash
# Does `ferry tune` find settings as good as an exhaustive grid?
#
# On an emulated long path (ferry-wan: 30 ms one way, 1 Gbit/s, tbf shaper,
# by default) this runs, against one `ferry serve --memory-paths` in the
# server namespace and from the client namespace:
#   1. `ferry probe`                      the path in numbers (RTT, rate, BDP)
#   2. `ferry tune  URL --json`           the one-knob-at-a-time sweep
#   3. `ferry tune  URL --exhaustive`     every point of the SAME space (the
#                                         streams and TCP buffers tune used),
#                                         REPEATS passes, median per point
#   4. head to head: `ferry cp` with tune's pick and with the grid's best,
#      alternating, H2H times each
# and writes bench/results/tune-vs-grid-<delay>.md (tables, ratio, load,
# commands) and .svg (every grid point, tune's trials and pick).
#
# Every trial downloads the server's /dev/zero to /dev/null, sized by
# --memory-zero-size to BYTES, so a trial is exactly
# `ferry cp ftp://server/dev/zero /dev/null` with the trial's settings.
# In a download the server picks the MODE E block size and a discarding
# receiver stages nothing, so the knobs in effect (and swept, by both) are
# parallel streams and TCP buffer; see docs/tune.md.
#
# Bounded: each trial by BYTES and TRIAL_SECONDS, the grid by its size
# (5 stream counts x 5-6 buffers x REPEATS), the whole run by TIME_LIMIT.
#
# Usage: bench/tune-vs-grid.sh            (root: namespaces, TUN devices)
#        bench/tune-vs-grid.sh --report WORK   (rewrite the report of a run)
#   DELAY=30ms RATE=1gbit BYTES=512M REPEATS=2 H2H=3 TIME_LIMIT=2700
#   NAME=ftune (ferry-wan link name; namespaces NAME-c, NAME-s)
set -euo pipefail

DELAY=${DELAY:-30ms}
RATE=${RATE:-1gbit}
BYTES=${BYTES:-512M}
REPEATS=${REPEATS:-2}
H2H=${H2H:-3}
TRIAL_SECONDS=${TRIAL_SECONDS:-30}
TIME_LIMIT=${TIME_LIMIT:-2700}
NAME=${NAME:-ftune}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT=${OUT:-$ROOT/bench/results/tune-vs-grid-$DELAY}

if [[ "${1:-}" != --inner ]]; then
    if [[ "${1:-}" == --report ]]; then
        # Only (re)write the report from a finished run's work directory.
        WORK=$2
    else
        [[ $(id -u) == 0 ]] || { echo "tune-vs-grid: needs root (network namespaces)" >&2; exit 1; }
        (cd "$ROOT" && cargo build --release -q -p ferry -p ferry-wan)
        WORK=$(mktemp -d /tmp/tune-vs-grid.XXXXXX)
        export WORK DELAY RATE BYTES REPEATS H2H TRIAL_SECONDS NAME OUT TARGET_DIR ROOT
        echo "tune-vs-grid: $DELAY one way, $RATE, tbf; $BYTES per trial; work in $WORK" >&2
        timeout --signal=TERM "$TIME_LIMIT" "$TARGET_DIR/release/ferry-wan" up --name "$NAME" \
            --delay "$DELAY" --rate "$RATE" --shaper tbf -- "$0" --inner
    fi
    mkdir -p "$(dirname "$OUT")"
    python3 - "$WORK" "$OUT" <<'PY'
import json, sys, html, os, datetime
work, out = sys.argv[1], sys.argv[2]
J = lambda n: json.load(open(os.path.join(work, n)))
probe, tune, grid = J("probe.json"), J("tune.json"), J("grid.json")
h2h = [json.loads(l) for l in open(os.path.join(work, "h2h.jsonl")) if l.strip()]
meta = dict(l.rstrip("\n").split("=", 1) for l in open(os.path.join(work, "meta.txt")))
MB = 1e6
mbit = lambda r: r * 8 / 1e6
def buf(b): return "auto" if b is None else (f"{b / 2**20:.3g} MiB")
def key(c): return (c["streams"], c["tcp_buffer"])
grid_trials = grid["result"]["trials"]
gpoint = {key(t["config"]): t for t in grid_trials}
gbest = grid["result"]["best"]; gbest_rate = grid["result"]["best_rate"]
pick = tune["result"]["best"]; pick_rate_tune = tune["result"]["best_rate"]
pick_in_grid = gpoint[key(pick)]["rate"]
ratio_grid = pick_in_grid / gbest_rate
ratio_own = pick_rate_tune / gbest_rate
def med(v):
    v = sorted(v); n = len(v)
    return 0 if n == 0 else (v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2)
h_t = [x["mb_per_s"] for x in h2h if x["which"] == "tune"]
h_g = [x["mb_per_s"] for x in h2h if x["which"] == "grid"]
ratio_h2h = med(h_t) / med(h_g) if h_g and med(h_g) > 0 else float("nan")
streams = sorted({t["config"]["streams"] for t in grid_trials})
bufs = []
for t in grid_trials:
    if t["config"]["tcp_buffer"] not in bufs: bufs.append(t["config"]["tcp_buffer"])
bufs.sort(key=lambda b: -1 if b is None else b)
L = []
w = L.append
w(f"# `ferry tune` against an exhaustive grid: {meta['delay']} one way, {meta['rate']}")
w("")
w(f"Made {meta['date']} by `bench/tune-vs-grid.sh` (commit {meta['commit']}) on {meta['machine']}.")
w("")
w(f"**Result: tune's pick reaches {ratio_grid:.1%} of the grid's best** (both measured in the grid run; "
  f"acceptance: at least 90%). Tune measured {len(tune['result']['trials'])} configurations, the grid "
  f"{len(grid_trials)} x {grid['budget']['repeats']} passes.")
w("")
w("| | configuration | rate | ratio to the grid's best |")
w("|---|---|---|---|")
w(f"| grid's best | {gbest['streams']} streams, TCP buffer {buf(gbest['tcp_buffer'])} | {gbest_rate/MB:.1f} MB/s ({mbit(gbest_rate):.0f} Mbit/s) | 1 |")
w(f"| tune's pick, in the grid run | {pick['streams']} streams, TCP buffer {buf(pick['tcp_buffer'])} | {pick_in_grid/MB:.1f} MB/s ({mbit(pick_in_grid):.0f} Mbit/s) | **{ratio_grid:.3f}** |")
w(f"| tune's pick, in the tune run | same | {pick_rate_tune/MB:.1f} MB/s ({mbit(pick_rate_tune):.0f} Mbit/s) | {ratio_own:.3f} |")
if h_t and h_g:
    w(f"| head to head, `ferry cp` x{len(h_t)} each, alternating (medians) | tune: `{tune['flags']}`, grid: `{grid['flags']}` | {med(h_t):.1f} vs {med(h_g):.1f} MB/s | {ratio_h2h:.3f} |")
w("")
w("Rates are payload bytes over the time from the transfer command to its end (data connections, TCP start "
  "and data); `ferry cp`'s MB/s in the head-to-head rows also include connecting and logging in.")
w("")
w("## The path")
w("")
w(f"`ferry probe`: kernel RTT of the control connection {probe['report']['rtt_ms']:.1f} ms "
  f"(min {probe['report']['rtt_min_ms'] or float('nan'):.1f} ms); a {probe['measurement']['bytes']/2**20:.0f} MiB "
  f"4-stream download of /dev/zero: {mbit(probe['measurement']['bytes']/probe['measurement']['seconds']):.0f} Mbit/s on average"
  + (f", {mbit(probe['measurement']['steady_rate']):.0f} Mbit/s in its second half" if probe['measurement'].get('steady_rate') else "")
  + f"; bandwidth-delay product {probe['report']['bdp_bytes']/2**20:.2f} MiB. Client buffer limits: tcp_rmem max "
  f"{probe['report']['limits']['autotune_rmem_max']/2**20:.0f} MiB, tcp_wmem max {probe['report']['limits']['autotune_wmem_max']/2**20:.0f} MiB "
  f"(ferry-wan's tuned namespaces), net.core.rmem_max {probe['report']['limits']['rmem_max']/2**20:.0f} MiB "
  f"(global: every explicit `--tcp-bs` above it is clamped to it).")
w("")
w(f"The space (the same for both): streams {', '.join(map(str, streams))} x TCP buffer "
  f"{', '.join(buf(b) for b in bufs)} (\"BDP\" = {buf(tune['bdp_bytes']) if tune.get('bdp_bytes') else '—'}, measured by tune) "
  f"= {len(grid_trials)} points; block size and staging are not in effect in a download (docs/tune.md). "
  f"Per trial: {meta['bytes']} (`--memory-zero-size`, so every trial is the whole of /dev/zero), "
  f"at most {meta['trial_seconds']} s, 1 s pause between trials.")
w("")
w("## Every grid point (MB/s, median of the passes; each pass's figure in brackets)")
w("")
w("| streams \\ TCP buffer | " + " | ".join(buf(b) for b in bufs) + " |")
w("|---|" + "---|" * len(bufs))
for s in streams:
    cells = []
    for b in bufs:
        t = gpoint[(s, b)]
        c = f"{t['rate']/MB:.1f} [{' '.join(f'{x/MB:.0f}' for x in t['rates'])}]"
        if t["error"]: c = "failed"
        if key(t["config"]) == key(gbest): c = f"**{c}** best"
        if key(t["config"]) == key(pick): c += " ← tune"
        cells.append(c)
    w(f"| {s} | " + " | ".join(cells) + " |")
w("")
w("## Tune's trials, in order")
w("")
w("| # | knob | streams | TCP buffer | MB/s | Mbit/s | verdict |")
w("|---|---|---|---|---|---|---|")
for t in tune["result"]["trials"]:
    if t["error"]: v = "failed: " + t["error"]
    elif t["accepted"] and t["knob"] is None: v = "start"
    elif t["accepted"]: v = "kept"
    else: v = f"< +{tune['budget']['min_gain']*100:.0f}%"
    w(f"| {t['index']} | {t['knob'] or '—'} | {t['config']['streams']} | {buf(t['config']['tcp_buffer'])} | {t['rate']/MB:.1f} | {mbit(t['rate']):.0f} | {v} |")
w("")
w(f"Tune's recommendation: {tune['recommendation']}")
w("")
if h2h:
    w("## Head to head")
    w("")
    w("| run | settings | MB/s (`ferry cp --json`) |")
    w("|---|---|---|")
    for i, x in enumerate(h2h, 1):
        w(f"| {i} | {x['which']}: `{x['flags']}` | {x['mb_per_s']:.1f} |")
    w("")
w("## Load")
w("")
w("The machine is shared (2 cores); load averages (1, 5, 15 min) at each phase:")
w("")
for k in ("load_start", "load_after_probe", "load_after_tune", "load_after_grid", "load_end"):
    w(f"* {k.replace('_', ' ')}: {meta.get(k, '?')}")
w("")
w("## How it was made")
w("")
w("```sh")
w(meta["command"])
w("# which ran, inside `ferry-wan up --name NAME --delay %s --rate %s --shaper tbf --`:" % (meta['delay'], meta['rate']))
w("ip netns exec NAME-s ferry serve DIR --listen $FERRY_WAN_SERVER_IP:0 --anonymous read --memory-paths --memory-zero-size %s" % meta['bytes'])
w("ip netns exec NAME-c ferry probe URL --json")
w("ip netns exec NAME-c ferry tune URL/dev/zero --bytes %s --seconds %s --json" % (meta['bytes'], meta['trial_seconds']))
w("ip netns exec NAME-c ferry tune URL/dev/zero --exhaustive --repeats %s --streams S --tcp-bs B --json   # S, B: tune's space" % meta['repeats'])
w("ip netns exec NAME-c ferry cp --json FLAGS URL/dev/zero /dev/null   # head to head, alternating")
w("```")
open(out + ".md", "w").write("\n".join(L) + "\n")

# The plot: x = configurations (streams x buffer, grid order), y = Mbit/s.
W, H, ml, mr, mt, mb = 900, 460, 70, 20, 50, 120
pts = grid_trials
n = len(pts)
ymax = max([t["rate"] for t in pts] + [max(t["rates"] or [0]) for t in pts] + [pick_rate_tune]) * 8 / 1e6 * 1.1
X = lambda i: ml + (i + 0.5) * (W - ml - mr) / n
Y = lambda v: mt + (H - mt - mb) * (1 - v / ymax)
S = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
     f'<rect width="{W}" height="{H}" fill="white"/>',
     f'<text x="{W/2}" y="20" text-anchor="middle" font-size="14">ferry tune vs exhaustive grid, {html.escape(meta["delay"])} one way, {html.escape(meta["rate"])} (download of /dev/zero, {html.escape(meta["bytes"])} per trial)</text>',
     f'<text x="{W/2}" y="37" text-anchor="middle">tune\'s pick reaches {ratio_grid:.1%} of the grid\'s best ({len(tune["result"]["trials"])} trials vs {n} points x {grid["budget"]["repeats"]})</text>']
for k in range(0, 6):
    v = ymax * k / 5
    S.append(f'<line x1="{ml}" x2="{W-mr}" y1="{Y(v):.1f}" y2="{Y(v):.1f}" stroke="#ddd"/>')
    S.append(f'<text x="{ml-5}" y="{Y(v)+4:.1f}" text-anchor="end">{v:.0f}</text>')
S.append(f'<text transform="translate(15,{(mt+H-mb)/2}) rotate(-90)" text-anchor="middle">Mbit/s</text>')
for i, t in enumerate(pts):
    x = X(i)
    for r in t["rates"]:
        S.append(f'<circle cx="{x:.1f}" cy="{Y(mbit(r)):.1f}" r="2" fill="#9ab"/>')
    color = "#c33" if key(t["config"]) == key(gbest) else "#357"
    S.append(f'<rect x="{x-4:.1f}" y="{Y(mbit(t["rate"]))-1:.1f}" width="8" height="2.5" fill="{color}"/>')
    lab = f'{t["config"]["streams"]}s {buf(t["config"]["tcp_buffer"])}'
    S.append(f'<text transform="translate({x+3:.1f},{H-mb+8}) rotate(60)" font-size="9">{html.escape(lab)}</text>')
    if key(t["config"]) == key(pick):
        S.append(f'<path d="M{x:.1f},{Y(mbit(t["rate"]))-6:.1f} l-5,-10 h10 z" fill="#e80"/>')
idx = {key(t["config"]): i for i, t in enumerate(pts)}
for t in tune["result"]["trials"]:
    i = idx.get(key(t["config"]))
    if i is not None and not t["error"]:
        S.append(f'<circle cx="{X(i)+5:.1f}" cy="{Y(mbit(t["rate"])):.1f}" r="3.5" fill="none" stroke="#e80" stroke-width="1.5"/>')
ly = H - 18
S.append(f'<rect x="{ml}" y="{ly-8}" width="8" height="2.5" fill="#357"/><text x="{ml+12}" y="{ly-4}">grid point (median)</text>')
S.append(f'<circle cx="{ml+140}" cy="{ly-7}" r="2" fill="#9ab"/><text x="{ml+146}" y="{ly-4}">each pass</text>')
S.append(f'<rect x="{ml+220}" y="{ly-8}" width="8" height="2.5" fill="#c33"/><text x="{ml+232}" y="{ly-4}">grid best</text>')
S.append(f'<circle cx="{ml+310}" cy="{ly-7}" r="3.5" fill="none" stroke="#e80" stroke-width="1.5"/><text x="{ml+318}" y="{ly-4}">tune trial (its own run)</text>')
S.append(f'<path d="M{ml+470},{ly-2} l-5,-10 h10 z" fill="#e80"/><text x="{ml+480}" y="{ly-4}">tune\'s pick</text>')
S.append('</svg>')
open(out + ".svg", "w").write("\n".join(S) + "\n")
print(f"tune-vs-grid: tune's pick {ratio_grid:.3f} of the grid's best (head to head {ratio_h2h:.3f}); wrote {out}.md and .svg")
PY
    echo "tune-vs-grid: raw JSON kept in $WORK (bench/tune-vs-grid.sh --report $WORK rewrites the report)" >&2
    exit 0
fi

# --- inside `ferry-wan up`: the link is up, FERRY_WAN_* name its ends ---
F=$TARGET_DIR/release/ferry
# Trials and the head-to-head copies must not read anyone's client config.
export FERRY_CONFIG=/dev/null
C=(ip netns exec "$FERRY_WAN_CLIENT_NS")
load() { cut -d' ' -f1-3 /proc/loadavg; }
{
    echo "delay=$DELAY"
    echo "rate=$RATE"
    echo "bytes=$BYTES"
    echo "repeats=$REPEATS"
    echo "trial_seconds=$TRIAL_SECONDS"
    echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
    echo "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "machine=$(uname -sr), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/{print $2}') GiB, congestion control $(sysctl -n net.ipv4.tcp_congestion_control)"
    echo "command=DELAY=$DELAY RATE=$RATE BYTES=$BYTES REPEATS=$REPEATS H2H=$H2H bench/tune-vs-grid.sh"
    echo "load_start=$(load)"
} > "$WORK/meta.txt"
mkdir -p "$WORK/root"
: > "$WORK/server.out"
ip netns exec "$FERRY_WAN_SERVER_NS" "$F" serve "$WORK/root" --listen "$FERRY_WAN_SERVER_IP:0" \
    --anonymous read --memory-paths --memory-zero-size "$BYTES" >"$WORK/server.out" 2>"$WORK/server.log" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 50); do grep -q "ftp://" "$WORK/server.out" && break; sleep 0.1; done
URL=$(sed -n 's/.*on \(ftp:\/\/[^ ]*\)/\1/p' "$WORK/server.out" | sed 's:/$::')
[[ -n $URL ]] || { echo "tune-vs-grid: the server did not start" >&2; cat "$WORK/server.log" >&2; exit 1; }
echo "tune-vs-grid: server $URL" >&2

"${C[@]}" "$F" probe "$URL" --json --bytes "$BYTES" > "$WORK/probe.json"
echo "load_after_probe=$(load)" >> "$WORK/meta.txt"
"${C[@]}" "$F" tune "$URL/dev/zero" --bytes "$BYTES" --seconds "$TRIAL_SECONDS" --json > "$WORK/tune.json"
echo "load_after_tune=$(load)" >> "$WORK/meta.txt"
# The grid covers exactly tune's space: its streams and its TCP buffers
# (auto, the BDP tune measured, the fixed sizes).
STREAMS=$(python3 -c 'import json,sys; print(",".join(str(s) for s in json.load(open(sys.argv[1]))["space"]["streams"]))' "$WORK/tune.json")
BUFS=$(python3 -c 'import json,sys; print(",".join("auto" if b is None else str(b) for b in json.load(open(sys.argv[1]))["space"]["tcp_buffers"]))' "$WORK/tune.json")
"${C[@]}" "$F" tune "$URL/dev/zero" --exhaustive --repeats "$REPEATS" --streams "$STREAMS" --tcp-bs "$BUFS" \
    --bytes "$BYTES" --seconds "$TRIAL_SECONDS" --json > "$WORK/grid.json"
echo "load_after_grid=$(load)" >> "$WORK/meta.txt"
TF=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["flags"])' "$WORK/tune.json")
GF=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["flags"])' "$WORK/grid.json")
: > "$WORK/h2h.jsonl"
for i in $(seq "$H2H"); do
    for which in tune grid; do
        if [[ $which == tune ]]; then FL=$TF; else FL=$GF; fi
        sleep 1
        # shellcheck disable=SC2086 # FL is a list of flags
        R=$("${C[@]}" "$F" cp --json --no-resume --retries 0 $FL "$URL/dev/zero" /dev/null)
        python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(json.dumps({"which":sys.argv[2],"flags":sys.argv[3],"mb_per_s":d["mb_per_s"],"seconds":d["seconds"]}))' \
            "$R" "$which" "$FL" >> "$WORK/h2h.jsonl"
    done
done
echo "load_end=$(load)" >> "$WORK/meta.txt"
