#!/usr/bin/env bash
# Run a private registry (Debian's docker-registry binary, as a host process,
# not a container) on 127.0.0.1:$ODEK_TEST_REGISTRY_PORT (default 5555), push
# this checkout's base image (odek-test-<ns>/base:1, tests/ns.sh) to it, and
# print the pinned reference on stdout:
#   127.0.0.1:<port>/odek-test-<ns>/base@sha256:<digest>
# (also written to <cache>/registry/pinned-ref). Idempotent; stop with stop.sh.
# Docker treats 127.0.0.0/8 as an insecure registry, so plain HTTP works.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${ODEK_TEST_CACHE:-$REPO/target/odek-test-images}
# shellcheck source=tests/ns.sh
. "$REPO/tests/ns.sh"
PORT=${ODEK_TEST_REGISTRY_PORT:-5555}
DIR=$CACHE/registry
ADDR=127.0.0.1:$PORT
IMAGE=$ODEK_TEST_IMAGES/base:1

log() { echo "==> $*" >&2; }
answers() { curl -fsS -o /dev/null --max-time 2 "http://$ADDR/v2/" 2>/dev/null; }
# Our registry is alive: pid file names a live docker-registry process (not a reused pid).
running() { [[ -s $DIR/pid && $(cat "/proc/$(cat "$DIR/pid")/comm" 2>/dev/null) == docker-registry ]]; }

command -v docker-registry >/dev/null || { echo "docker-registry missing: apt-get install -y docker-registry" >&2; exit 1; }
docker image inspect "$IMAGE" >/dev/null 2>&1 || { echo "missing $IMAGE: run tests/images/build.sh" >&2; exit 1; }
mkdir -p "$DIR/storage"

if running && ! grep -qx "  addr: $ADDR" "$DIR/config.yml"; then
  echo "test registry already running on another port ($DIR/config.yml); run stop.sh first" >&2
  exit 1
elif running; then
  log "registry already running (pid $(cat "$DIR/pid")) on $ADDR"
else
  cat >"$DIR/config.yml" <<YML
version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $DIR/storage
  delete:
    enabled: true
http:
  addr: $ADDR
YML
  log "starting docker-registry on $ADDR (log: $DIR/registry.log)"
  # setsid: own session, so it outlives this script and its terminal. Every
  # inherited descriptor above 2 is closed first: a lock the caller holds
  # (`flock /tmp/odek-docker.lock cargo test …`) would otherwise stay held by
  # the registry for as long as it runs, and every later flock would wait.
  (
    for fd in /proc/self/fd/*; do
      fd=${fd##*/}
      if ((fd > 2)); then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid docker-registry serve "$DIR/config.yml" >>"$DIR/registry.log" 2>&1 </dev/null
  ) &
  echo $! >"$DIR/pid"
fi

for _ in $(seq 50); do
  answers && break
  running || { tail -n 20 "$DIR/registry.log" >&2; echo "registry exited" >&2; exit 1; }
  sleep 0.2
done
answers || { echo "registry on $ADDR does not answer /v2/" >&2; exit 1; }

log "pushing $IMAGE to $ADDR"
docker tag "$IMAGE" "$ADDR/$IMAGE"
out=$(docker push "$ADDR/$IMAGE" 2>&1) || { echo "$out" >&2; docker rmi "$ADDR/$IMAGE" >/dev/null; exit 1; }
docker rmi "$ADDR/$IMAGE" >/dev/null
digest=$(grep -o 'digest: sha256:[0-9a-f]\{64\}' <<<"$out" | tail -n 1 | cut -d' ' -f2)
[[ -n $digest ]] || { echo "no digest in push output: $out" >&2; exit 1; }

ref="$ADDR/${IMAGE%:*}@$digest"
echo "$ref" >"$DIR/pinned-ref"
echo "$ref"
