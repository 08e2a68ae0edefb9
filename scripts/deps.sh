#!/usr/bin/env bash
# Installs every Debian package Ferry's tests use: the ones
# scripts/preflight.sh checks for (the real peers — curl, lftp, pure-ftpd,
# Python, Globus's server, client and client library, gfal2 with its file
# and gridftp plugins, libudt — the compilers for the C and C++ test
# peers, iproute2 and iperf3 for the emulator, perf and headless Chromium
# for the profiler, PostgreSQL for the transfer service's queue), plus
# what building needs. Safe to run again: it installs only what is
# missing, running `apt-get update` first.
set -euo pipefail
here="$(dirname "$0")"

mapfile -t packages < <("$here/preflight.sh" --packages)
packages+=(
  # building: rustc links with cc; ring compiles C with it
  libc6-dev
)

"$here/apt-install.sh" deps "${packages[@]}"

command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked
