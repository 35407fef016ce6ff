#!/usr/bin/env bash
# Runs odek's real-Docker e2e suite from prebuilt test binaries (nix/e2e-tests.nix)
# — inside the NixOS VM of checks.<system>.e2e, or on any Linux host whose
# Docker daemon has the odek-test-nix/* images loaded (nix/test-images.nix).
#
# Environment:
#   ODEK_BIN          the odek binary under test (required)
#   ODEK_E2E          the odek-e2e-tests package: libexec/odek-e2e/* test
#                     binaries, share/odek-e2e/source (required)
#   ODEK_REPO         where the suite's source tree is (tests/e2e/src/lib.rs
#                     reads its scripts and Compose fixture there); when it
#                     lacks the fixture, a writable copy of the packaged source
#                     is put there (default /var/lib/odek-e2e-source)
#   ODEK_TEST_CACHE   scratch for the suite's registry (default /var/lib/odek-e2e)
#   ODEK_E2E_THREADS  --test-threads per binary (default 4, as `cargo xtask e2e`)
#   ODEK_E2E_CLEANUP  1 (default): run tests/e2e/cleanup.sh at the end
#
# The binaries find the suite's scripts and Compose fixture through
# ODEK_REPO (without it, through the workspace root they were compiled in,
# env!("CARGO_MANIFEST_DIR"), which does not exist outside that build).
# Each binary runs (in tests/e2e, as cargo would); the exit status is non-zero
# when any binary failed, and the last line counts binaries ("e2e-binaries: N passed, N failed").
set -euo pipefail

: "${ODEK_BIN:?set ODEK_BIN to the odek binary under test}"
: "${ODEK_E2E:?set ODEK_E2E to the odek-e2e-tests package}"
export ODEK_BIN
# The namespace the suite was compiled with (nix/e2e-tests.nix), for the
# scripts it runs (up.sh, cleanup.sh).
export ODEK_TEST_NS=${ODEK_TEST_NS:-nix}
export ODEK_TEST_CACHE=${ODEK_TEST_CACHE:-/var/lib/odek-e2e}
threads=${ODEK_E2E_THREADS:-4}

root=${ODEK_REPO:-/var/lib/odek-e2e-source}
if [[ ! -f $root/tests/fixtures/compose/docker-compose.yml ]]; then
  echo "==> placing the e2e source tree at $root" >&2
  mkdir -p "$root"
  cp -rT "$ODEK_E2E/share/odek-e2e/source/" "$root"
  chmod -R u+w "$root"
fi
root=$(cd "$root" && pwd)
export ODEK_REPO=$root
mkdir -p "$ODEK_TEST_CACHE"

shopt -s nullglob
binaries=("$ODEK_E2E"/libexec/odek-e2e/*)
(( ${#binaries[@]} )) || { echo "no test binaries in $ODEK_E2E/libexec/odek-e2e" >&2; exit 1; }

passed=0
failed=()
for bin in "${binaries[@]}"; do
  name=$(basename "$bin")
  echo "==> $name" >&2
  if (cd "$root/tests/e2e" && "$bin" --test-threads "$threads"); then
    passed=$((passed + 1))
  else
    failed+=("$name")
  fi
done

if [[ ${ODEK_E2E_CLEANUP:-1} == 1 && -f $root/tests/e2e/cleanup.sh ]]; then
  bash "$root/tests/e2e/cleanup.sh" || true
fi

if (( ${#failed[@]} )); then
  echo "==> failed: ${failed[*]}" >&2
fi
echo "e2e-binaries: ${passed} passed, ${#failed[@]} failed"
(( ${#failed[@]} == 0 ))
