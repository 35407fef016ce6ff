#!/usr/bin/env bash
# Remove what this checkout's e2e suite created — and only that: odek sandboxes
# whose /workspace is an e2e scratch dir, networks labelled with this checkout's
# dev.odek.test.ns (tests/ns.sh), its fixture Compose project, and the loopback
# registry. Images stay (cached), but for the
# one-case images a test builds and normally removes itself.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=tests/ns.sh
REPO=$repo . "$repo/tests/ns.sh"

for id in $(docker ps -aq --filter label=dev.odek.sandbox=true); do
  wd=$(docker inspect -f '{{index .Config.Labels "dev.odek.workdir"}}' "$id" 2>/dev/null)
  case "$wd" in
    /tmp/odek-e2e-*|"$repo"/target/*) docker rm -f "$id" >/dev/null ;;
  esac
done
"$repo/tests/fixtures/compose/down.sh" "$ODEK_TEST_PROJECT" >/dev/null 2>&1 || true
for id in $(docker network ls -q --filter label=dev.odek.test=true --filter "label=$ODEK_TEST_NS_LABEL"); do
  docker network rm "$id" >/dev/null 2>&1 || true
done
"$repo/tests/registry/stop.sh" >/dev/null 2>&1 || true
# images a test built for one case (refusals.rs ImageIgnoringArgs)
for id in $(docker images -q --filter label=dev.odek.test=true --filter "reference=$ODEK_TEST_IMAGES/ignores-args"); do
  docker rmi -f "$id" >/dev/null 2>&1 || true
done
exit 0
