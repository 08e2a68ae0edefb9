#!/usr/bin/env bash
# Installs every Debian package Ferry's tests and benchmarks use. Safe to run
# again: it installs only what is missing, running `apt-get update` first.
set -euo pipefail

packages=(
  # real peers the interoperability tests run against
  curl lftp pure-ftpd python3
  globus-gridftp-server-progs globus-gass-copy-progs
  gfal2-util-scripts gfal2-plugin-gridftp
  # setpriv (the Globus server runs unprivileged), md5sum/sha256sum
  util-linux coreutils
  # network namespaces and the link emulator's self-test
  iproute2 iperf3
  # the UDT interoperability peer, built at test time against libudt 4.11
  g++ libudt-dev
  # the profiler: perf for CPU profiles, a headless browser (and the fonts
  # it is only recommended) for the report's screenshot test
  linux-perf chromium fonts-liberation
  # the transfer service's shared queue: the tests start their own server
  postgresql
  # the induced-bottleneck suite: ext4 on loop devices, a TLS certificate,
  # sysctl inside namespaces
  e2fsprogs openssl procps
)

"$(dirname "$0")/apt-install.sh" deps "${packages[@]}"

command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked
