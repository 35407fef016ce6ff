#!/usr/bin/env bash
# Builds what odek-bench measures — the release odek CLI, the release
# libodek.so (Python and Go bindings), the static odek-supervisor and the
# bench itself — makes sure the offline test images and the MCP SDK venv
# (target/mcp-venv, for the `odek mcp` variant) exist, then runs the bench.
# Arguments go to odek-bench, e.g.  bench/run.sh -n 30   or
# bench/run.sh --only launch,exec,sup
# Results: target/bench/results.json and results.txt (under CARGO_TARGET_DIR
# when that is set).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
# This checkout's test image and a Compose project of its own (tests/ns.sh).
# shellcheck source=tests/ns.sh
. "$REPO/tests/ns.sh"
export ODEK_BENCH_PROJECT=${ODEK_BENCH_PROJECT:-odekbench$ODEK_TEST_NS}
export ODEK_BENCH_IMAGE=${ODEK_BENCH_IMAGE:-$ODEK_TEST_IMAGES/base:1}
# Cargo's target directory, as cargo picks it (CARGO_TARGET_DIR, relative to
# here, else target/): odek-bench is told it, so that it measures the builds
# below and not what an older build left in target/.
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
[[ $TARGET == /* ]] || TARGET=$REPO/$TARGET
bash tests/images/build.sh
cargo build --release -p odek-bench -p odek-cli
# --features testing: phase 2b runs the bindings on libodek's fake engine. A
# build of its own: given with the other packages as odek-ffi/testing, cargo
# builds libodek without the feature.
cargo build --release -p odek-ffi --features testing
# The supervisor as cargo xtask builds it: static, so it runs on any image.
HOST=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release -p odek-supervisor \
  --bin odek-supervisor --target "$HOST" --target-dir "$TARGET/static"
VENV=$REPO/target/mcp-venv
if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import mcp' 2>/dev/null; then
  echo "==> creating $VENV (pip install mcp)" >&2
  if ! { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q mcp; }; then
    # Without the SDK the bench leaves the `odek mcp` row out and says so.
    echo "warning: could not install the MCP SDK into $VENV; no odek mcp row" >&2
    rm -rf "$VENV"
  fi
fi
# odek-bench finds both by default ($TARGET/static/$HOST/release, target/mcp-venv).
exec "$TARGET/release/odek-bench" --target-dir "$TARGET" "$@"
