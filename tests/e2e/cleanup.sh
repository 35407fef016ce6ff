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
# Egress proxies (docs/SPEC.md §4.5) whose sandbox is gone, and the
# egress tests' stand-in hosts.
for id in $(docker ps -aq --filter label=dev.odek.sandbox=egress); do
  of=$(docker inspect -f '{{index .Config.Labels "dev.odek.egress"}}' "$id" 2>/dev/null)
  docker inspect --type container "$of" >/dev/null 2>&1 || docker rm -f "$id" >/dev/null
done
for id in $(docker ps -aq --filter label=dev.odek.test=true --filter "label=$ODEK_TEST_NS_LABEL" --filter name=odek-e2e-standin-); do
  docker rm -f "$id" >/dev/null
done
"$repo/tests/fixtures/compose/down.sh" "$ODEK_TEST_PROJECT" >/dev/null 2>&1 || true
for id in $(docker network ls -q --filter label=dev.odek.test=true --filter "label=$ODEK_TEST_NS_LABEL"); do
  docker network rm "$id" >/dev/null 2>&1 || true
done
"$repo/tests/registry/stop.sh" >/dev/null 2>&1 || true
# second daemons a killed test left (tests/e2e/src/second_daemon.rs): their
# containers and networks through their own socket, the daemon and what it
# started (by process ID: command lines naming its directory), the directory
for d in /tmp/odek-e2e-dd-*; do
  [ -d "$d" ] || continue
  sock="unix://$d/run/docker.sock"
  if [ -S "$d/run/docker.sock" ] && docker -H "$sock" version >/dev/null 2>&1; then
    for id in $(docker -H "$sock" ps -aq); do docker -H "$sock" rm -f "$id" >/dev/null 2>&1 || true; done
    for id in $(docker -H "$sock" network ls -q --filter type=custom); do
      docker -H "$sock" network rm "$id" >/dev/null 2>&1 || true
    done
  fi
  if [ -f "$d/run/docker.pid" ]; then
    pid=$(cat "$d/run/docker.pid")
    kill -TERM "$pid" 2>/dev/null && for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  fi
  for p in /proc/[0-9]*; do
    if { tr '\0' ' ' < "$p/cmdline"; } 2>/dev/null | grep -qF "$d"; then kill -KILL "${p#/proc/}" 2>/dev/null || true; fi
  done
  sleep 1
  rm -rf "$d"
done
# images a test built for one case (refusals.rs ImageIgnoringArgs)
for id in $(docker images -q --filter label=dev.odek.test=true --filter "reference=$ODEK_TEST_IMAGES/ignores-args"); do
  docker rmi -f "$id" >/dev/null 2>&1 || true
done
exit 0
