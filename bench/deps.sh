#!/usr/bin/env bash
# Installs the Debian packages the benchmark harness drives: the Globus
# GridFTP server and client (the anchors), the UDT driver (whose use is
# checked in every run), iperf3 (the network's limit), fio (the disk's),
# and the tools the emulated paths need. Safe to run again: it installs
# only what is missing, running `apt-get update` first.
set -euo pipefail

packages=(
  globus-gridftp-server-progs globus-gass-copy-progs libglobus-xio-udt-driver
  iperf3 fio
  # ip and tc (namespaces, tbf), setpriv/findmnt/lsblk, sync/df, getent
  iproute2 util-linux coreutils libc-bin
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "bench/deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  # Debian starts daemons it installs (iperf3 asks to); the harness starts
  # its own servers on free ports.
  echo exit 101 | $sudo tee /usr/sbin/policy-rc.d >/dev/null
  $sudo chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  $sudo rm -f /usr/sbin/policy-rc.d
fi
