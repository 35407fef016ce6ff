#!/usr/bin/env bash
# Stop the test registry started by start.sh (via its pid file). Safe when not running.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DIR=${ODEK_TEST_CACHE:-$REPO/target/odek-test-images}/registry

# Only kill a live docker-registry process (guards against a reused pid).
if [[ -s $DIR/pid ]] && pid=$(cat "$DIR/pid") && [[ $(cat "/proc/$pid/comm" 2>/dev/null) == docker-registry ]]; then
  echo "==> stopping docker-registry (pid $pid)" >&2
  kill "$pid"
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
else
  echo "==> test registry not running" >&2
fi
rm -f "$DIR/pid"
