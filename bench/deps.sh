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
  # udt-* scenarios: UDT4's example programs (built with g++ against
  # libudt) and uftp/uftpd as anchors
  g++ libudt-dev uftp
  # ip and tc (namespaces, tbf), setpriv/findmnt/lsblk, sync/df, getent
  iproute2 util-linux coreutils libc-bin
  # ferry-bench-service: the two-node rows share a PostgreSQL queue
  postgresql
  # bench/bottlenecks.sh: ext4 on loop devices, a TLS certificate, sysctl
  e2fsprogs openssl procps
)

"$(dirname "$0")/../scripts/apt-install.sh" bench/deps "${packages[@]}"
