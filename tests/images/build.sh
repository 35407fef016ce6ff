#!/usr/bin/env bash
# Build odek's offline test images from Debian packages (no registry needed):
#   odek-test-<ns>/base:1      sh, redis-cli, psql, pg_isready, getent, ip, nc; CMD sleep infinity
#   odek-test-<ns>/redis:1     CMD odek-test-redis     (EXPOSE 6379)
#   odek-test-<ns>/postgres:1  CMD odek-test-postgres  (EXPOSE 5432)
#   odek-test-<ns>/busybox:1   BusyBox only (its ash as /bin/sh): the shell and tools of
#                              the pinned alpine default, for the exec-kill script
# <ns> is this checkout's namespace (tests/ns.sh), so checkouts sharing a
# daemon keep their own images.
# The first three are `docker import`s of one debootstrap rootfs, so they share one
# layer; the BusyBox image holds that rootfs's static busybox and its applet links.
# The rootfs tarball is cached, so a rebuild after `docker rmi` only re-imports.
# Needs root, debootstrap, docker, and access to deb.debian.org (first build only).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tests/ns.sh
. "$REPO/tests/ns.sh"
CACHE=${ODEK_TEST_CACHE:-$REPO/target/odek-test-images}
# Bump ROOTFS_VERSION whenever the package list or the scripts below change.
ROOTFS_VERSION=4
TARBALL=$CACHE/rootfs-bookworm-v$ROOTFS_VERSION.tar
I=$ODEK_TEST_IMAGES
IMAGES=("$I/base:1" "$I/redis:1" "$I/postgres:1" "$I/busybox:1")
PACKAGES=redis-server,redis-tools,postgresql,postgresql-client,iproute2,procps,libc-bin,netcat-openbsd,ca-certificates,busybox-static
MIRROR=http://deb.debian.org/debian
LABEL="dev.odek.test=true $ODEK_TEST_NS_LABEL"

log() { echo "==> $*" >&2; }

# Fast path: nothing to do when every image exists.
have_all=1
for img in "${IMAGES[@]}"; do
  docker image inspect "$img" >/dev/null 2>&1 || { have_all=0; break; }
done
if [[ $have_all == 1 ]]; then
  log "test images already present: ${IMAGES[*]}"
  exit 0
fi

if [[ ! -s $TARBALL ]]; then
  # debootstrap lives in /usr/sbin (not on a normal user's PATH) and needs
  # root: say which of the two is missing, and the fix.
  DEBOOTSTRAP=$(PATH="$PATH:/usr/sbin:/sbin" command -v debootstrap || true)
  [[ -n $DEBOOTSTRAP ]] || { echo "debootstrap missing: sudo apt-get install -y debootstrap" >&2; exit 1; }
  if [[ $(id -u) -ne 0 ]]; then
    echo "building the test images needs root once (debootstrap makes a Debian root file system): run \`sudo bash $REPO/tests/images/build.sh\` (root needs no Rust toolchain for it; \`sudo cargo xtask images\` works where root has one), then carry on as yourself; the images are then on the daemon for every user" >&2
    exit 1
  fi
  mkdir -p "$CACHE"
  # Run through sudo: the cache (and a target/ this made) go back to the
  # user who ran sudo, whose next cargo build writes there.
  # (A function the EXIT traps below call: a second `trap … EXIT` replaces
  # the first.)
  give_back() {
    if [[ -n ${SUDO_UID:-} && -n ${SUDO_GID:-} ]]; then
      chown -R "$SUDO_UID:$SUDO_GID" "$CACHE" 2>/dev/null
      [[ $(stat -c %u "$REPO/target" 2>/dev/null) == 0 ]] && chown "$SUDO_UID:$SUDO_GID" "$REPO/target" 2>/dev/null
    fi
    true
  }
  trap give_back EXIT
  ROOT=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  # debootstrap mounts /proc (and may mount /sys) inside the rootfs and can
  # leave them mounted when its own umount races a package's exiting process;
  # never pack, or delete, through a mount.
  unmount_inside() {
    awk -v r="$ROOT/" 'index($2, r) == 1 { print $2 }' /proc/mounts | sort -r |
      while read -r m; do umount "$m" 2>/dev/null || umount -l "$m"; done
  }
  trap 'unmount_inside; rm -rf "$ROOT"; give_back' EXIT

  log "debootstrap (about 45-90 s)"
  start=$SECONDS
  "$DEBOOTSTRAP" --variant=minbase --include="$PACKAGES" bookworm "$ROOT" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -n 30 "$CACHE/debootstrap.log" >&2; exit 1; }
  log "debootstrap done in $((SECONDS - start)) s"
  unmount_inside

  log "trimming rootfs"
  # Default cluster made by the postgresql postinst: unused, our script runs its own.
  rm -rf "$ROOT"/var/lib/postgresql/*/main "$ROOT"/etc/postgresql/*/main
  rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/* "$ROOT"/var/cache/debconf/*-old \
         "$ROOT"/usr/share/doc/* "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* \
         "$ROOT"/usr/share/locale/* "$ROOT"/var/log/*.log "$ROOT"/var/log/apt/* "$ROOT"/tmp/*
  # PostgreSQL's optional LLVM JIT is ~160 MB; nothing else links it (jit=off below).
  rm -rf "$ROOT"/usr/lib/postgresql/*/lib/llvmjit* "$ROOT"/usr/lib/postgresql/*/lib/bitcode \
         "$ROOT"/usr/lib/x86_64-linux-gnu/libLLVM-* "$ROOT"/usr/lib/x86_64-linux-gnu/libz3.so* \
         "$ROOT"/usr/share/i18n
  # Docker bind-mounts these at run time.
  rm -f "$ROOT"/etc/hostname "$ROOT"/etc/resolv.conf

  cat >"$ROOT"/usr/local/bin/odek-test-redis <<'SH'
#!/bin/sh
# Redis for tests: reachable from other containers, no persistence.
exec redis-server --bind 0.0.0.0 --protected-mode no --save '' --appendonly no "$@"
SH

  cat >"$ROOT"/usr/local/bin/odek-test-postgres <<'SH'
#!/bin/sh
# PostgreSQL for tests: trust auth from anywhere, foreground, as user postgres
# even when the container starts as root. setpriv execs (no fork), so postgres
# itself becomes PID 1 and gets docker's SIGTERM directly.
set -eu
PGDATA=${PGDATA:-/var/lib/postgresql/data}
BIN=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
AS_PG=
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /run/postgresql
  chown postgres:postgres "$PGDATA" /run/postgresql
  chmod 700 "$PGDATA"
  AS_PG="setpriv --reuid=postgres --regid=postgres --init-groups --"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  $AS_PG "$BIN/initdb" -D "$PGDATA" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
  printf 'host all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n' >>"$PGDATA/pg_hba.conf"
  printf "listen_addresses = '*'\njit = off\n" >>"$PGDATA/postgresql.conf"
fi
exec $AS_PG "$BIN/postgres" -D "$PGDATA" "$@"
SH
  chmod 755 "$ROOT"/usr/local/bin/odek-test-redis "$ROOT"/usr/local/bin/odek-test-postgres

  log "packing rootfs to $TARBALL"
  tar --numeric-owner -C "$ROOT" -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  find "$CACHE" -maxdepth 1 -name 'rootfs-*.tar' ! -path "$TARBALL" -delete  # stale versions
  rm -rf "$ROOT"
  give_back
  trap - EXIT
else
  log "using cached rootfs $TARBALL"
fi

# import NAME CHANGE... : one image from the cached tarball.
import() {
  local name=$1; shift
  local args=(--change "LABEL $LABEL" --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
              --change "ENV LANG=C.UTF-8")
  for c in "$@"; do args+=(--change "$c"); done
  log "docker import $name"
  docker import "${args[@]}" "$TARBALL" "$name" >/dev/null
}

start=$SECONDS
import "$I/base:1"     'CMD ["sleep","infinity"]'
import "$I/redis:1"    'CMD ["odek-test-redis"]'    'EXPOSE 6379'
import "$I/postgres:1" 'CMD ["odek-test-postgres"]' 'EXPOSE 5432'

# BusyBox: /bin/busybox from the rootfs (merged /usr: it lives in usr/bin) and
# a link per applet, nothing else.
BB=$(mktemp -d "${TMPDIR:-/tmp}/odek-busybox.XXXXXX")
mkdir -p "$BB/x" "$BB/bin" "$BB/tmp" "$BB/workspace" "$BB/etc"
tar -C "$BB/x" -xf "$TARBALL" ./usr/bin/busybox 2>/dev/null || tar -C "$BB/x" -xf "$TARBALL" ./bin/busybox
for f in "$BB/x/usr/bin/busybox" "$BB/x/bin/busybox"; do
  if [ -f "$f" ]; then mv "$f" "$BB/bin/busybox"; break; fi
done
[ -x "$BB/bin/busybox" ] || { echo "no busybox in $TARBALL (package busybox-static)" >&2; exit 1; }
rm -rf "$BB/x"
for applet in $("$BB/bin/busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$BB/bin/$applet"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$BB/etc/passwd"
log "docker import $I/busybox:1"
tar --numeric-owner -C "$BB" -c . | docker import --change "LABEL $LABEL" --change "ENV PATH=/bin" \
  --change 'CMD ["sleep","2147483647"]' - "$I/busybox:1" >/dev/null
rm -rf "$BB"
log "imports done in $((SECONDS - start)) s"
