#!/usr/bin/env bash
# Installs every Debian package Ferry's tests use: the ones
# scripts/preflight.sh checks for (the real peers — curl, lftp, pure-ftpd,
# Python, Globus's server, client and client library, gfal2 with its file
# and gridftp plugins — gcc and pkg-config for the C test client,
# iproute2 and iperf3 for the emulator, perf and headless Chromium for the
# profiler, PostgreSQL for the transfer service's queue), plus what
# building needs. Safe to run again: it installs only
# what is missing, running `apt-get update` first.
set -euo pipefail
here="$(dirname "$0")"

mapfile -t packages < <("$here/preflight.sh" --packages)
packages+=(
  # building: rustc links with cc; ring compiles C with it
  libc6-dev
  # not checked by preflight but installed all the same: the UDT
  # interoperability peer (built at test time against libudt 4.11), the
  # profiler's perf and headless browser, the emulator's iperf3, and
  # PostgreSQL for the transfer service's shared queue
  g++ libudt-dev linux-perf chromium fonts-liberation iproute2 iperf3 postgresql
  # the induced-bottleneck suite: ext4 on loop devices, a TLS certificate,
  # sysctl inside namespaces
  e2fsprogs openssl procps
)

"$here/apt-install.sh" deps "${packages[@]}"

command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked
