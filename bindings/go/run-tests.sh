#!/usr/bin/env bash
# Test the Go binding: build libodek (cargo build -p odek-ffi --features
# testing, for the fake engine; a no-op when it is up to date), write a pkg-config file for that debug build
# (target/go-pkgconfig/odek.pc, with an rpath, so the test binaries find
# libodek.so) and put it first on PKG_CONFIG_PATH, then `go vet ./...` and
# `go test -race -count=1 ./...` here. The package itself links by
# `pkg-config odek` (link.go); nothing in it names a target directory.
# The real-Docker tests need a daemon and FAIL without one (they never skip);
# they build the test images and start the fixture Compose project themselves
# (tests/images/build.sh, tests/fixtures/compose/up.sh odeke2e<ns>: idempotent;
# <ns> is this checkout's test namespace, tests/ns.sh).
#
# Usage: bindings/go/run-tests.sh [go test flags…]   e.g.  -run Fake -v
# Env: ODEK_SKIP_CARGO_BUILD=1 uses the library as it is; GOCACHE / GOPATH
# default to target/go-cache / target/gopath (CI runs as root, maybe
# without a usable HOME); ODEK_GO_TEST_PROJECT picks another fixture project.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
[[ $TARGET = /* ]] || TARGET=$ROOT/$TARGET

command -v go >/dev/null 2>&1 || { echo "run-tests.sh: go not found (apt-get install golang-go)" >&2; exit 1; }
command -v pkg-config >/dev/null 2>&1 || { echo "run-tests.sh: pkg-config not found (apt-get install pkg-config)" >&2; exit 1; }

export GO111MODULE=on
export CGO_ENABLED=1          # cgo, and -race, need it
export GOFLAGS=${GOFLAGS:-}
export GOPROXY=off            # standard library only: never fetch a module
export GOTOOLCHAIN=local      # ignored by go 1.19; keeps newer go from downloading one
export GOCACHE=${GOCACHE:-$ROOT/target/go-cache}
export GOPATH=${GOPATH:-$ROOT/target/gopath}
export GOMODCACHE=${GOMODCACHE:-$GOPATH/pkg/mod}
export HOME=${HOME:-$ROOT/target}
mkdir -p "$GOCACHE" "$GOPATH"

if [[ ${ODEK_SKIP_CARGO_BUILD:-} != 1 ]]; then
  # --features testing: the fake-engine tests need the in-memory engine and
  # odek_debug_panic, which release builds (cargo xtask dist) omit.
  echo "==> cargo build -p odek-ffi --features testing" >&2
  (cd "$ROOT" && cargo build -p odek-ffi --features testing)
fi
LIBDIR=$TARGET/debug
[[ -f $LIBDIR/libodek.so ]] || { echo "run-tests.sh: $LIBDIR/libodek.so missing" >&2; exit 1; }

# pkg-config files for the debug build (the installed ones come from
# `cargo xtask dist`): odek (shared, rpath to the build) and odek-static.
PC=$TARGET/go-pkgconfig
mkdir -p "$PC"
cat >"$PC/odek.pc" <<PCF
libdir=$LIBDIR
includedir=$HERE/include

Name: odek
Description: odek C ABI (workspace debug build, for bindings/go/run-tests.sh)
Version: 0
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lodek
Cflags: -I\${includedir}
PCF
cat >"$PC/odek-static.pc" <<PCF
libdir=$LIBDIR
includedir=$HERE/include

Name: odek-static
Description: odek C ABI, static (workspace debug build, for bindings/go/run-tests.sh)
Version: 0
Libs: \${libdir}/libodek.a -lpthread -ldl -lm -lrt -lutil -lgcc_s
Cflags: -I\${includedir}
PCF
export PKG_CONFIG_PATH=$PC${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}

cd "$HERE"
echo "==> go version: $(go version)" >&2
echo "==> go vet ./..." >&2
go vet ./...
echo "==> go test -race -count=1 ./... $*" >&2
go test -race -count=1 -timeout 20m "$@" ./...
