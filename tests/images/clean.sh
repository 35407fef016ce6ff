#!/usr/bin/env bash
# Remove this checkout's test images: ONLY images labelled dev.odek.test=true
# and this checkout's dev.odek.test.ns (tests/ns.sh).
# With --cache, also delete the cached rootfs tarball (and registry storage).
# Usage: tests/images/clean.sh [--cache]
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${ODEK_TEST_CACHE:-$REPO/target/odek-test-images}
# shellcheck source=tests/ns.sh
. "$REPO/tests/ns.sh"

# Every reference of a labelled image: repo:tag, else repo@digest (pulled by
# digest), else the bare ID (dangling), so no copy is left behind.
refs=()
while read -r id repo tag digest; do
  if [[ $tag != '<none>' ]]; then refs+=("$repo:$tag")
  elif [[ $repo != '<none>' && $digest != '<none>' ]]; then refs+=("$repo@$digest")
  else refs+=("$id"); fi
done < <(docker image ls --digests --filter label=dev.odek.test=true --filter "label=$ODEK_TEST_NS_LABEL" \
           --format '{{.ID}} {{.Repository}} {{.Tag}} {{.Digest}}')
if (( ${#refs[@]} )); then
  echo "==> removing ${refs[*]}" >&2
  docker rmi "${refs[@]}" >/dev/null
else
  echo "==> no images labelled $ODEK_TEST_NS_LABEL" >&2
fi

if [[ ${1:-} == --cache ]]; then
  echo "==> removing cache $CACHE" >&2
  rm -rf "$CACHE"
fi
