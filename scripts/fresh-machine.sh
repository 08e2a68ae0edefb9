#!/usr/bin/env bash
# Proves that CI (`.ci/run`: deps, fmt, clippy, scripts/test) passes on a
# machine that has never seen Ferry: a minimal Debian bookworm tree made
# with debootstrap, from the mirror apt already uses here, with only the
# Rust toolchain brought in (bind mounts of /root/.cargo, /root/.rustup and
# cargo-nextest). The repository's committed HEAD is cloned into it and
# `.ci/run` runs inside the chroot as root, installing with apt whatever the
# tests need. Uncommitted changes are not part of the test.
#
#   scripts/fresh-machine.sh [--keep] [--dir DIR] [--command CMD]
#
#   --keep     leave the tree (DIR/root) for a second look or run
#   --dir DIR  work there (default: a new directory under /var/tmp); a tree
#              left by --keep is reused, debootstrap is skipped
#   --command  run CMD in the clone instead of `bash .ci/run` (to try the
#              tree itself; not a test of anything)
#
# Needs root, debootstrap, unshare and git; the network only for the Debian
# mirror (cargo runs offline, from the bound registry). It takes a while:
# debootstrap and apt, a full build, the whole suite. Everything runs in a
# private mount namespace, so the mounts made here — and those the tests
# make (`ip netns`, tmpfs) — end with it; the tree is removed afterwards
# unless --keep. Exit status: that of `.ci/run`. Log: DIR/fresh-machine.log.
set -euo pipefail

keep=0
work=""
command="bash .ci/run"
inner=0
while [ $# -gt 0 ]; do
  case $1 in
    --keep) keep=1 ;;
    --dir) work=$2; shift ;;
    --command) command=$2; shift ;;
    --inner) inner=1 ;;
    *) echo "usage: $0 [--keep] [--dir DIR] [--command CMD]" >&2; exit 2 ;;
  esac
  shift
done

[ "$(id -u)" -eq 0 ] || { echo "fresh-machine: must run as root (debootstrap, chroot, mounts)" >&2; exit 2; }
for tool in debootstrap unshare chroot git findmnt; do
  command -v "$tool" >/dev/null || { echo "fresh-machine: $tool is missing" >&2; exit 2; }
done

repo=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
suite=bookworm

# The mirror apt uses here (deb822 or one-line format), else Debian's.
mirror() {
  local m
  m=$(grep -hs '^URIs:' /etc/apt/sources.list.d/debian.sources | awk '{print $2}' | grep -v security | head -1 || true)
  [ -n "$m" ] || m=$(grep -hs '^deb ' /etc/apt/sources.list | awk '$3 == "'$suite'" {print $2}' | head -1 || true)
  echo "${m:-http://deb.debian.org/debian}"
}

stamp() { date '+%H:%M:%S'; }

if [ "$inner" -eq 0 ]; then
  # ---- outside: make the work directory, run the rest in a private mount
  # namespace, clean up after it.
  [ -n "$work" ] || work=$(mktemp -d /var/tmp/ferry-fresh.XXXXXX)
  mkdir -p "$work"
  work=$(cd "$work" && pwd)
  log="$work/fresh-machine.log"
  if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
    echo "fresh-machine: note: $repo has uncommitted changes; only the committed HEAD is tested" >&2
  fi
  cleanup() {
    # The namespace's mounts are gone with it; anything still mounted
    # under the tree here would be a bug, and rm must never cross into it.
    if findmnt -rn -o TARGET | grep -qE "^$work/root(/|\$)"; then
      echo "fresh-machine: mounts remain under $work/root; not removing it" >&2
      findmnt -rn -o TARGET | grep -E "^$work/root(/|\$)" >&2
      return
    fi
    if [ "$keep" -eq 0 ]; then
      rm -rf --one-file-system "$work/root"
      echo "fresh-machine: removed $work/root (log kept: $log)" >&2
    else
      echo "fresh-machine: kept $work/root" >&2
    fi
  }
  trap cleanup EXIT
  start=$(date +%s)
  tested=$(git -C "$repo" rev-parse --short HEAD)
  set +e
  unshare --mount --propagation private -- "$0" --inner --dir "$work" --command "$command" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  end=$(date +%s)
  echo "fresh-machine: '$command' in a fresh $suite tree exited $status after $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s (HEAD $tested)" | tee -a "$log" >&2
  exit "$status"
fi

# ---- inside the private mount namespace.
root="$work/root"
head=$(git -C "$repo" rev-parse HEAD)

unmount_all() {
  # Deepest first; lazily, so a process the tests left behind cannot keep
  # a mount alive past the namespace.
  findmnt -rn -o TARGET | grep -E "^$root(/|\$)" | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
}
trap unmount_all EXIT

if [ ! -x "$root/usr/bin/apt-get" ]; then
  echo "[$(stamp)] debootstrap --variant=minbase $suite from $(mirror)"
  debootstrap --variant=minbase "$suite" "$root" "$(mirror)" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; exit 1; }
  echo "[$(stamp)] debootstrap done: $(du -sh --one-file-system "$root" | cut -f1)"
fi

# apt's sources and name resolution as on this host: the same mirror.
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  rm -f "$root/etc/apt/sources.list"
  cp /etc/apt/sources.list.d/debian.sources "$root/etc/apt/sources.list.d/debian.sources"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# debootstrap writes no /etc/hosts; Debian's installer writes this one (the
# chroot shares this host's name).
if [ ! -e "$root/etc/hosts" ]; then
  printf '127.0.0.1\tlocalhost\n127.0.1.1\t%s\n\n::1\tlocalhost ip6-localhost ip6-loopback\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n' \
    "$(hostname)" >"$root/etc/hosts"
fi
for keyring in /usr/share/keyrings/debian-archive-keyring.gpg; do
  [ -e "$root$keyring" ] || { mkdir -p "$(dirname "$root$keyring")"; cp "$keyring" "$root$keyring"; }
done

# The tree's top must be a mount point, as a real root is: `ip -n NS ...`
# and `ip netns exec` remount "/" as a slave in their own mount namespace,
# which fails (EINVAL) on a directory that is not one.
mount --bind "$root" "$root"
# What a fresh machine with Rust has: the toolchain. Nothing else of this
# host is visible inside.
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
# `ip netns` keeps its handles in /run/netns; a tmpfs, like a booted system.
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mkdir -p "$root/root/.cargo" "$root/root/.rustup"
mount --bind /root/.cargo "$root/root/.cargo"
mount --bind /root/.rustup "$root/root/.rustup"
touch "$root/usr/local/bin/cargo-nextest"
mount --bind /usr/local/bin/cargo-nextest "$root/usr/local/bin/cargo-nextest"

# A clone of the committed HEAD (not this worktree's files).
rm -rf "$root/ferry"
git clone --quiet --no-hardlinks "$repo" "$root/ferry"
git -C "$root/ferry" checkout --quiet --detach "$head"
echo "[$(stamp)] cloned $head into the tree; running '$command' as root inside it"

# A clean environment: no LANG (the POSIX locale of a fresh system), cargo
# offline (the registry cache comes with the toolchain; the network is for
# the Debian mirror only). The build keeps line tables but not full debug
# information, and no incremental caches: with them the workspace's test
# binaries take over 10 GB, which a shared build machine may not have
# (backtraces still name file and line; nothing the tests check changes).
chroot "$root" /usr/bin/env -i \
  HOME=/root \
  PATH=/root/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  TERM=dumb \
  CARGO_NET_OFFLINE=true \
  CARGO_INCREMENTAL=0 \
  CARGO_PROFILE_DEV_DEBUG=line-tables-only \
  CARGO_TERM_COLOR=never \
  /bin/bash -c "cd /ferry && time $command"
