#!/usr/bin/env bash
# End-to-end tests of `odek mcp` with the official MCP Python SDK as the
# client, against the real Docker daemon and the Compose fixture.
#   tests/mcp/run-tests.sh [pytest args…]
# Creates the venv target/mcp-venv (pip install mcp pytest), builds
# target/debug/odek, builds the offline test images if missing, starts the
# fixture as Compose project $ODEK_MCP_PROJECT (default odekmcp<ns>, this
# checkout's: tests/ns.sh) and stops it again at the end.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
VENV=${ODEK_MCP_VENV:-$REPO/target/mcp-venv}
# shellcheck source=tests/ns.sh
. "$REPO/tests/ns.sh"
export ODEK_MCP_PROJECT=${ODEK_MCP_PROJECT:-odekmcp$ODEK_TEST_NS}
export ODEK_MCP_IMAGE=${ODEK_MCP_IMAGE:-$ODEK_TEST_IMAGES/base:1}

if [[ ! -x $VENV/bin/pytest ]]; then
  echo "==> creating $VENV (pip install mcp pytest)" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q mcp pytest
fi

echo "==> cargo build -p odek-cli" >&2
(cd "$REPO" && nice -n 15 cargo build -q -p odek-cli)

"$REPO/tests/images/build.sh"
"$REPO/tests/fixtures/compose/up.sh" "$ODEK_MCP_PROJECT"
trap '"$REPO/tests/fixtures/compose/down.sh" "$ODEK_MCP_PROJECT"' EXIT

cd "$REPO"
"$VENV/bin/pytest" -v -p no:cacheprovider tests/mcp "$@"
