#!/usr/bin/env bash
# C smoke suite for odek's C ABI (ffi/include/odek.h), linked to the staticlib.
#
#   bash ffi/tests/c/run.sh            all stages: build, abuse, loop under valgrind, real Docker
#   bash ffi/tests/c/run.sh abuse loop  only the named stages (build always runs)
#
# Stages:
#   abuse  smoke abuse: NULL / invalid UTF-8 / invalid JSON / bad handles / forced
#          panic against every export (in-memory fake engine, no Docker).
#   loop   smoke loop $ODEK_C_SMOKE_CYCLES (default 1000) under valgrind memcheck;
#          fails on any definitely or indirectly lost byte, or any memcheck error.
#          "Possibly lost" (the runtime's never-joined worker threads) and "still
#          reachable" (process-wide statics) do not count.
#   real   smoke real <dir> against the real Docker daemon and the fixture Compose
#          project $ODEK_TEST_PROJECT (tests/ns.sh; images and project are prepared first, idempotently);
#          fails, never skips, when Docker is unavailable. Checks afterwards that
#          no sandbox container of <dir> is left.
#
# Environment:
#   ODEK_C_SMOKE_CYCLES   loop cycles under valgrind (default 1000, as the issue demands)
#   ODEK_C_SMOKE_PROFILE  debug (default) or release: which libodek.a to build and link
#   CC                    C compiler (default gcc)
#
# Timing (debug build, this 2-core machine): abuse ~2 s; real ~3 s (plus
# compose up); loop 1000 cycles ~7 s natively, under valgrind ~1 min of startup
# (reading the debug info of the ~90 MB test binary and, once, compiling the
# image-reference regex) plus ~0.15 s per cycle: 203-211 s in total when the
# machine is otherwise idle, up to ~1.2 s per cycle (~20 min) under heavy
# concurrent load. ODEK_C_SMOKE_PROFILE=release links the release staticlib
# instead (not timed here).
#
# Every stage runs even when an earlier one failed; the exit status is 1 when
# any stage failed. Output of each stage is kept in target/c-smoke/*.log
# (under CARGO_TARGET_DIR when set).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
# This checkout's image and project names, exported for smoke.c's real stage.
# shellcheck source=tests/ns.sh
. "$REPO/tests/ns.sh"
HERE=$REPO/ffi/tests/c
PROFILE=${ODEK_C_SMOKE_PROFILE:-debug}
CYCLES=${ODEK_C_SMOKE_CYCLES:-1000}
CC=${CC:-gcc}
# cargo builds into CARGO_TARGET_DIR when it is set: link what it built.
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
OUT=$TARGET/c-smoke
BIN=$OUT/smoke
LIB=$TARGET/$PROFILE/libodek.a
# What `cargo rustc -p odek-ffi --lib --crate-type staticlib -- --print native-static-libs`
# reports on Linux/glibc.
NATIVE_LIBS=(-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)

stages=("$@")
(( ${#stages[@]} )) || stages=(abuse loop real)

log() { echo "==> $*" >&2; }
failed=()

case $PROFILE in
  debug) cargo_flags=() ;;
  release) cargo_flags=(--release) ;;
  *) echo "ODEK_C_SMOKE_PROFILE must be debug or release" >&2; exit 2 ;;
esac
[[ $CYCLES =~ ^[1-9][0-9]*$ ]] || { echo "ODEK_C_SMOKE_CYCLES must be a positive integer" >&2; exit 2; }

cd "$REPO"
mkdir -p "$OUT"

# --features testing: the abuse and loop stages use the in-memory engine and
# odek_debug_panic (declared under ODEK_TESTING in the header).
log "cargo build -p odek-ffi --features testing ${cargo_flags[*]}"
cargo build -p odek-ffi --features testing "${cargo_flags[@]}"

log "compile smoke.c against ffi/include/odek.h, link $LIB"
"$CC" -std=c11 -Wall -Wextra -Werror -pedantic -g -O0 -DODEK_TESTING \
  -I "$REPO/ffi/include" "$HERE/smoke.c" "$LIB" "${NATIVE_LIBS[@]}" -o "$BIN"

# odek reads $ODEK_HOME (approval store, user config): keep the suite away from
# the operator's. The C program itself never reads the user config.
ODEK_HOME=$(mktemp -d "${TMPDIR:-/tmp}/odek-c-smoke-home.XXXXXX")
export ODEK_HOME
workdir=
cleanup() {
  rm -rf "$ODEK_HOME"
  if [[ -n $workdir ]]; then rm -rf "$workdir"; fi
}
trap cleanup EXIT

run_abuse() {
  log "smoke abuse (a caught Rust panic prints its message to stderr: expected)"
  local start=$SECONDS rc=0
  "$BIN" abuse 2> >(tee "$OUT/abuse.stderr.log" >&2) | tee "$OUT/abuse.log" || rc=$?
  log "abuse: exit $rc in $((SECONDS - start)) s; $(grep -c '^FAIL' "$OUT/abuse.log" || true) FAIL line(s)"
  return "$rc"
}

run_loop() {
  command -v valgrind >/dev/null || { echo "valgrind is not installed" >&2; return 1; }
  log "valgrind smoke loop $CYCLES (this takes minutes; progress every 50 cycles)"
  local start=$SECONDS rc=0
  # RUST_BACKTRACE=0: the forced panics would otherwise symbolize a backtrace
  # under valgrind (tens of seconds, and a large one-time symbol cache that
  # valgrind lists as still reachable). The panic path itself still runs.
  RUST_BACKTRACE=0 valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --error-exitcode=1 --num-callers=40 --log-file="$OUT/valgrind.log" \
    "$BIN" loop "$CYCLES" | tee "$OUT/loop.log" || rc=$?
  local secs=$((SECONDS - start))
  grep -E 'definitely lost:|indirectly lost:|possibly lost:|still reachable:|ERROR SUMMARY:' \
    "$OUT/valgrind.log" | sed 's/^==[0-9]*== */valgrind: /' >&2 || true
  # Belt and braces (--error-exitcode already covers these): 0 bytes definitely
  # and indirectly lost, or no leak at all.
  if ! grep -q 'All heap blocks were freed' "$OUT/valgrind.log"; then
    local def ind
    def=$(sed -n 's/.*definitely lost: \([0-9,]*\) bytes.*/\1/p' "$OUT/valgrind.log" | tr -d , | tail -n 1)
    ind=$(sed -n 's/.*indirectly lost: \([0-9,]*\) bytes.*/\1/p' "$OUT/valgrind.log" | tr -d , | tail -n 1)
    if [[ ${def:-missing} != 0 || ${ind:-missing} != 0 ]]; then
      echo "FAIL valgrind: definitely lost ${def:-?} bytes, indirectly lost ${ind:-?} bytes" >&2
      rc=1
    fi
  fi
  log "loop: $CYCLES cycles under valgrind: exit $rc in ${secs} s (full report: $OUT/valgrind.log)"
  return "$rc"
}

run_real() {
  log "real Docker: prerequisites"
  command -v docker >/dev/null || { echo "docker CLI not found: the real stage needs Docker" >&2; return 1; }
  docker info >/dev/null 2>&1 || { echo "the Docker daemon is unreachable: the real stage needs Docker" >&2; return 1; }
  bash "$REPO/tests/images/build.sh" || return 1
  bash "$REPO/tests/fixtures/compose/up.sh" "$ODEK_TEST_PROJECT" || return 1

  workdir=$(mktemp -d "${TMPDIR:-/tmp}/odek-c-smoke-real.XXXXXX")
  workdir=$(cd "$workdir" && pwd -P)
  log "smoke real $workdir"
  local start=$SECONDS rc=0
  "$BIN" real "$workdir" 2> >(tee "$OUT/real.stderr.log" >&2) | tee "$OUT/real.log" || rc=$?
  log "real: exit $rc in $((SECONDS - start)) s"

  local left
  left=$(docker ps -aq --filter label=dev.odek.sandbox=true --filter "label=dev.odek.workdir=$workdir")
  if [[ -n $left ]]; then
    echo "FAIL containers left behind for $workdir: $left" >&2
    # shellcheck disable=SC2086 # split on purpose: one argument per container id
    docker rm -f $left >/dev/null 2>&1 || true
    rc=1
  else
    echo "PASS no container left (docker ps -aq --filter label=dev.odek.sandbox=true --filter label=dev.odek.workdir=$workdir)"
  fi
  return "$rc"
}

for stage in "${stages[@]}"; do
  case $stage in
    abuse) run_abuse || failed+=(abuse) ;;
    loop) run_loop || failed+=(loop) ;;
    real) run_real || failed+=(real) ;;
    *) echo "unknown stage $stage (abuse, loop, real)" >&2; exit 2 ;;
  esac
done

if (( ${#failed[@]} )); then
  log "FAILED stages: ${failed[*]}"
  exit 1
fi
log "all stages passed: ${stages[*]}"
