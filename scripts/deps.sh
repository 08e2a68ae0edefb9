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
  # the profiler: perf for CPU profiles, a headless browser (and the fonts
  # it is only recommended) for the report's screenshot test
  linux-perf chromium fonts-liberation
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  # Debian starts daemons it installs unless told not to; Ferry's tests
  # start their own servers on free ports.
  echo exit 101 | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  $sudo rm -f /usr/sbin/policy-rc.d
fi

command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked
