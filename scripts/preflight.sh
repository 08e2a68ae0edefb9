#!/usr/bin/env bash
# Checks, before any test runs, that every peer program, gfal2 plugin and
# library the test suite uses is here, and names the Debian package of
# each one that is not. The list below is the only list: scripts/deps.sh
# installs `scripts/preflight.sh --packages`.
#
#   scripts/preflight.sh             check; exit 1 listing what is missing
#   scripts/preflight.sh --packages  print the Debian packages, one a line
set -euo pipefail

# kind  name  package   — what the tests run, and where Debian has it.
#   bin     a program on PATH (or in /usr/sbin, /sbin)
#   gfal    a gfal2 plugin (libgfal_plugin_NAME.so)
#   pc      a pkg-config module (C headers and library for test programs)
#   py      a module of Debian's Python 3 (/usr/bin/python3, which the gfal2
#           tools are run with: another python3 may come first on PATH)
#   file    a file matching a glob (programs outside PATH)
#   pkg     a package with no program to probe (fonts)
checks=(
  # the real peers of the interoperability tests
  "bin curl curl"
  "bin lftp lftp"
  "bin pure-ftpd pure-ftpd"
  "bin pure-pw pure-ftpd"
  "bin python3 python3"
  "bin rclone rclone"
  "bin globus-gridftp-server globus-gridftp-server-progs"
  "bin globus-url-copy globus-gass-copy-progs"
  "bin gfal-copy gfal2-util-scripts"
  "bin gfal-sum gfal2-util-scripts"
  "bin gfal-ls gfal2-util-scripts"
  "py gfal2 python3-gfal2"
  "gfal gridftp gfal2-plugin-gridftp"
  "gfal file gfal2-plugin-file"
  # the Globus client library, for the C test client (peers_globus_client.rs)
  "bin gcc gcc"
  "bin pkg-config pkgconf"
  "pc globus-ftp-client libglobus-ftp-client-dev"
  # the UDT interoperability peer, built at test time with g++ against
  # Debian's libudt 4.11 (crates/io/tests/udt_libudt.rs)
  "bin g++ g++"
  "file /usr/include/udt/udt.h libudt-dev"
  # the Globus server's UDT driver (-dc-default udt: udt_transport.rs)
  "file /usr/lib/*/libglobus_xio_udt_driver.so libglobus-xio-udt-driver"
  # the Globus server and PostgreSQL run unprivileged; file digests,
  # time limits, a tmpfs that fills up
  "bin setpriv util-linux"
  "bin mount mount"
  "bin timeout coreutils"
  "bin sha256sum coreutils"
  "bin md5sum coreutils"
  "bin getent libc-bin"
  "bin chown coreutils"
  "bin id coreutils"
  "bin umount mount"
  "bin kill procps"
  # a terminal for the password prompt test (credentials.rs)
  "bin script bsdutils"
  # network namespaces and the link emulator's self-test
  "bin ip iproute2"
  "bin tc iproute2"
  "bin iperf3 iperf3"
  # the induced-bottleneck suite (crates/cli/tests/bottlenecks.rs): ext4 on
  # loop devices, a TLS certificate, sysctl inside namespaces
  "bin mkfs.ext4 e2fsprogs"
  "bin losetup mount"
  "bin openssl openssl"
  "bin sysctl procps"
  # the profiler: perf, and a headless browser with fonts for the report
  "bin perf linux-perf"
  "bin chromium chromium"
  "pkg fonts-liberation fonts-liberation"
  # the transfer service's shared queue (crates/service/tests/pg)
  "file /usr/lib/postgresql/*/bin/initdb postgresql"
)

if [ "${1:-}" = "--packages" ]; then
  for c in "${checks[@]}"; do
    read -r _ _ package <<<"$c"
    echo "$package"
  done | sort -u
  exit 0
fi

have_bin() {
  command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]
}

have_gfal_plugin() {
  local f
  for f in /usr/lib/*/gfal2-plugins/libgfal_plugin_"$1".so /usr/lib*/gfal2-plugins/libgfal_plugin_"$1".so; do
    [ -e "$f" ] && return 0
  done
  return 1
}

missing=()
for c in "${checks[@]}"; do
  read -r kind name package <<<"$c"
  case $kind in
    bin) have_bin "$name" && continue ;;
    gfal) have_gfal_plugin "$name" && continue ;;
    pc) have_bin pkg-config && pkg-config --exists "$name" && continue ;;
    py) [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import $name" >/dev/null 2>&1 && continue ;;
    file) compgen -G "$name" >/dev/null && continue ;;
    pkg) [[ $(dpkg-query -W -f='${Status}' "$name" 2>/dev/null) == *"ok installed" ]] && continue ;;
  esac
  missing+=("$(printf '  %-5s %-28s from Debian package %s' "$kind" "$name" "$package")")
done
if ! have_bin cargo-nextest; then
  missing+=("  bin   cargo-nextest                 from cargo install cargo-nextest --locked")
fi
# The Globus libraries look up this machine's own name to describe their
# data channels ("globus_libc_gethostaddr failed" otherwise); Debian's
# installer maps it in /etc/hosts, a bare chroot or container may not.
name=$(hostname 2>/dev/null || cat /etc/hostname 2>/dev/null || echo localhost)
if ! getent hosts "$name" >/dev/null 2>&1; then
  missing+=("  host  $name: this machine's name does not resolve; add \"127.0.1.1 $name\" to /etc/hosts")
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "preflight: the test suite needs what is not installed here:" >&2
  printf '%s\n' "${missing[@]}" >&2
  echo "preflight: run scripts/deps.sh (it installs them with apt-get), or apt-get install the packages above." >&2
  exit 1
fi
echo "preflight: all ${#checks[@]} peer programs, plugins and libraries the tests use are installed." >&2
