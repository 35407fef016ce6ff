#!/usr/bin/env bash
# Per-tool wall times of one realistic agent session with `odek mcp`
# (tests/mcp/session_timings.py): a measurement, not a test — it asserts no
# time and is part of no suite.
#   tests/mcp/session-timings.sh [--sessions N] [--json FILE]
# Builds the release odek CLI (ODEK_BIN: use that binary instead), makes the
# venv target/mcp-venv (pip install mcp pytest, as run-tests.sh does) and the
# offline test images if missing, starts the Compose fixture as project
# $ODEK_MCP_PROJECT (default odektimings<ns>) and stops it again at the end.
# `cargo xtask session-timings` runs it with the static supervisor.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# This checkout's test images and a project name of its own (tests/ns.sh).
# shellcheck source=tests/ns.sh
. "$REPO/tests/ns.sh"
VENV=${ODEK_MCP_VENV:-$REPO/target/mcp-venv}
export ODEK_MCP_PROJECT=${ODEK_MCP_PROJECT:-odektimings$ODEK_TEST_NS}
export ODEK_MCP_IMAGE=${ODEK_MCP_IMAGE:-$ODEK_TEST_IMAGES/base:1}

if [[ ! -x $VENV/bin/python ]] || ! "$VENV/bin/python" -c 'import mcp' 2>/dev/null; then
  echo "==> creating $VENV (pip install mcp pytest)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q mcp pytest
fi

if [[ -z ${ODEK_BIN:-} ]]; then
  echo "==> cargo build --release -p odek-cli" >&2
  (cd "$REPO" && cargo build -q --release -p odek-cli)
fi

"$REPO/tests/images/build.sh"
"$REPO/tests/fixtures/compose/up.sh" "$ODEK_MCP_PROJECT"
trap '"$REPO/tests/fixtures/compose/down.sh" "$ODEK_MCP_PROJECT"' EXIT

"$VENV/bin/python" "$REPO/tests/mcp/session_timings.py" "$@"
