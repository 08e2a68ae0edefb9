#!/usr/bin/env bash
# Installs the named Debian packages that are not installed yet, with
# `apt-get update` first; nothing happens when all are there. Used by
# scripts/deps.sh (the tests) and bench/deps.sh (the benchmarks).
#
#   scripts/apt-install.sh LABEL PACKAGE...
set -euo pipefail
label=$1
shift

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -gt 0 ] || exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "$label: installing ${missing[*]}" >&2
# Another apt or dpkg (unattended-upgrades, a second helper) may hold the
# locks: wait for them rather than fail.
wait_lock=(-o DPkg::Lock::Timeout=600)
$sudo apt-get "${wait_lock[@]}" update -qq
# Debian starts the daemons it installs (iperf3, pure-ftpd) unless told not
# to; tests and benchmarks start their own servers on free ports.
echo exit 101 | $sudo tee /usr/sbin/policy-rc.d >/dev/null
$sudo chmod +x /usr/sbin/policy-rc.d
trap '$sudo rm -f /usr/sbin/policy-rc.d' EXIT
DEBIAN_FRONTEND=noninteractive $sudo apt-get "${wait_lock[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
