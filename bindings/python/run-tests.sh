#!/usr/bin/env bash
# Runs the Python binding's tests against the source tree: builds libodek.so
# (debug, cargo feature `testing`: the fake engine) if needed, prepares a venv under target/pyenv with pytest, puts this
# directory on PYTHONPATH (the package is not installed: installing builds a
# release wheel, which `cargo xtask package` tests separately), points
# ODEK_LIB at the library and runs pytest. Extra arguments go to pytest, e.g.
#   bindings/python/run-tests.sh -k fake        # a subset
#   bindings/python/run-tests.sh -m "not docker" # deselect the real-Docker tier
# The real-Docker tests need a daemon and FAIL (never skip) without one; they
# build the offline test images and bring up the fixture Compose project
# (tests/images/build.sh, tests/fixtures/compose/up.sh odeke2e<ns>, this
# checkout's names: tests/conftest.py, tests/ns.sh) themselves.
# ODEK_LIB set by the caller is used as is (no cargo build).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
VENV=$TARGET/pyenv
PYTHON=${PYTHON:-python3}

log() { echo "==> $*" >&2; }

if [[ -z ${ODEK_LIB:-} ]]; then
  # --features testing: the fake-engine tests need the in-memory engine and
  # odek_debug_panic, which release builds (the wheel, cargo xtask dist) omit.
  log "cargo build -p odek-ffi --features testing"
  (cd "$REPO" && cargo build -p odek-ffi --features testing)
  export ODEK_LIB=$TARGET/debug/libodek.so
fi
[[ -f $ODEK_LIB ]] || { echo "ODEK_LIB=$ODEK_LIB is not a file" >&2; exit 1; }

# (Re)create the venv when missing or when pyproject.toml changed.
STAMP=$VENV/.odek-installed
if [[ ! -x $VENV/bin/python ]]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
if [[ ! -f $STAMP || $HERE/pyproject.toml -nt $STAMP || ! -x $VENV/bin/mypy ]]; then
  log "pip install pytest"
  "$VENV/bin/python" -m pip uninstall --quiet --yes odek >/dev/null 2>&1 || true
  "$VENV/bin/python" -m pip install --quiet "pytest>=7" mypy
  touch "$STAMP"
fi
# The package is typed (py.typed): it must pass mypy --strict, as
# `cargo xtask package` checks again on the installed wheel. Checked here
# too so that a typing slip fails in minutes, not after the e2e suites.
log "mypy --strict -p odek"
(cd "$HERE" && "$VENV/bin/python" -m mypy --strict --cache-dir "$VENV/.mypy_cache" -p odek)
export PYTHONPATH=$HERE${PYTHONPATH:+:$PYTHONPATH}

log "pytest (ODEK_LIB=$ODEK_LIB)"
cd "$HERE"
exec "$VENV/bin/python" -m pytest "$@"
