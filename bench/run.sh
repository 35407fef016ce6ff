#!/usr/bin/env bash
# Builds what odek-bench measures — the release odek CLI, the release
# libodek.so (Python and Go bindings) and the bench itself — makes sure the
# offline test images exist, then runs the bench. Arguments go to odek-bench,
# e.g.  bench/run.sh -n 30   or   bench/run.sh --only launch,exec
# Results: target/bench/results.json and results.txt.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
bash tests/images/build.sh
# --features odek-ffi/testing: phase 2b runs the bindings on libodek's fake engine.
cargo build --release -p odek-bench -p odek-cli -p odek-ffi --features odek-ffi/testing
exec "$REPO/target/release/odek-bench" "$@"
