#!/usr/bin/env bash
# The pinned default image inside the e2e VM (SPEC §5, §6.3).
#
# dockerTools.pullImage fetched the pinned alpine by digest, but as a
# docker-archive of one platform: `docker load` gives it the name and tag
# (alpine:<tag>) and no RepoDigests, and the multi-arch index digest the pin
# names cannot be rebuilt from it. So in the VM, where no registry is
# reachable, odek must refuse the pinned default with the documented
# "cannot be pulled" failure (exit 125) rather than run on the look-alike
# local image: this script asserts exactly that, plus no host execution and
# no container left. (The by-digest happy path, RepoDigests included, is the
# suite's registry test against its own loopback registry.)
#
# Environment:
#   ODEK_BIN          the odek binary under test (required)
#   PINNED_REF        the pinned reference, e.g. alpine:3.22@sha256:… (required;
#                     the flake passes the value it parsed from default.Dockerfile)
#   PINNED_ARCHIVE    the pullImage archive to `docker load` first (optional)
set -euo pipefail

: "${ODEK_BIN:?set ODEK_BIN}"
: "${PINNED_REF:?set PINNED_REF}"
name_tag=${PINNED_REF%@*}
digest=${PINNED_REF#*@}

fail() { echo "pinned-default: FAIL: $*" >&2; exit 1; }

if [[ -n ${PINNED_ARCHIVE:-} ]]; then
  docker load -i "$PINNED_ARCHIVE" >&2
fi
repo_digests=$(docker image inspect -f '{{json .RepoDigests}}' "$name_tag") \
  || fail "$name_tag is not loaded"
[[ $repo_digests == "[]" ]] || fail "expected no RepoDigests on the loaded archive, got $repo_digests"
echo "pinned-default: $name_tag is loaded without RepoDigests" >&2

project=$(mktemp -d /tmp/odek-pinned-XXXXXX)
home=$(mktemp -d /tmp/odek-pinned-home-XXXXXX)
project=$(cd "$project" && pwd -P)
marker=$project/host-marker
leftovers() {
  docker ps -aq --filter label=dev.odek.sandbox=true --filter "label=dev.odek.workdir=$project"
}
cleanup() {
  local id
  for id in $(leftovers); do docker rm -f "$id" >/dev/null 2>&1 || true; done
  rm -rf "$project" "$home"
}
trap cleanup EXIT

run_odek() {
  (cd "$project" && env -u ODEK_SANDBOX_IMAGE ODEK_HOME="$home" \
    "$ODEK_BIN" -C "$project" "$@" </dev/null)
}

# The resolved plan names the pinned reference, digest included (§10.4).
view=$(run_odek config view --json) || fail "odek config view --json failed"
grep -qF "$digest" <<<"$view" || fail "config view does not show $digest: $view"

set +e
err=$(run_odek run --sandbox -- sh -c "touch $marker" 2>&1 >/dev/null)
code=$?
set -e
echo "$err" >&2
[[ $code == 125 ]] || fail "expected exit 125 (refusal), got $code"
grep -qF "cannot be pulled" <<<"$err" || fail "stderr does not say 'cannot be pulled'"
grep -qF "$digest" <<<"$err" || fail "stderr does not name the pinned digest"
[[ ! -e $marker ]] || fail "the command ran on the host ($marker exists)"
[[ -z $(leftovers) ]] || fail "odek left a container: $(leftovers)"
echo "pinned-default: refused as documented (exit 125, cannot be pulled, nothing left)" >&2
