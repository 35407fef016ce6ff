#!/usr/bin/env bash
# Self-test of nix/check-offline.sh: it must pass on the repository as it is
# and fail — for the right reason — on copies broken in one way each:
# a syntax error, a broken or inconsistent flake.lock, a wrong
# buildRustPackage / pullImage / NixOS argument, a missing output, a pullImage
# digest that differs from default.Dockerfile's, a copy of the digest in nix/,
# and a Dependabot bump of the digest without a new pullImage hash.
#
# Usage: bash nix/check-offline-selftest.sh [REPO_ROOT]
# Each case copies the repository's files (as git would track them) to a
# temporary directory, applies one edit (asserting the edit changed the file,
# so no case can pass vacuously), runs the check on the copy, and asserts its
# exit status and that its output names the expected failure. Offline; about
# 2 minutes on 2 cores. The last line reads "nix-selftest: N passed, N failed".
# shellcheck disable=SC2016  # sed scripts such as '$d' are meant literally
set -euo pipefail

ROOT=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
CHECK=$ROOT/nix/check-offline.sh
WORK=$(mktemp -d "${TMPDIR:-/tmp}/odek-nix-selftest.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

# The pristine copy every case starts from.
BASE=$WORK/base
mkdir -p "$BASE"
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # shellcheck disable=SC2016  # $f is expanded by the inner sh
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) \
    | (cd "$ROOT" && xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh) \
    | tar -C "$ROOT" --null -T - -cf - | tar -C "$BASE" -xf -
else
  (cd "$ROOT" && find . \( -name .git -o -path ./target -o -name 'result' -o -name 'result-*' \) -prune -o \
      \( -type f -o -type l \) -print0) | tar -C "$ROOT" --null -T - -cf - | tar -C "$BASE" -xf -
fi

# The pinned digest's hex, read (not copied) from the Dockerfile.
HEX=$(sed -n 's/.*@sha256:\([0-9a-f]\{64\}\).*/\1/p' "$BASE/core/src/image/default.Dockerfile")
[[ ${#HEX} == 64 ]] || { echo "selftest: cannot read the pinned digest" >&2; exit 1; }
OTHER_HEX=$(printf '%s' "$HEX" | sha256sum | cut -c1-64)

passed=0
failed=0
CASE=
ok() { passed=$((passed + 1)); echo "ok   - $CASE" >&2; }
not_ok() { failed=$((failed + 1)); echo "FAIL - $CASE: $*" >&2; }

# fresh NAME: a new copy of the pristine tree at $DIR.
fresh() {
  CASE=$1
  DIR=$WORK/case-$((passed + failed))
  cp -a "$BASE" "$DIR"
}

# edit FILE SED-SCRIPT: apply the edit; the case fails if nothing changed.
edit() {
  local file=$DIR/$1
  [[ -f $file ]] || { echo "no $1 in the copy" >&2; return 1; }
  cp "$file" "$file.orig"
  sed -i -e "$2" "$file"
  if cmp -s "$file" "$file.orig"; then
    rm -f "$file.orig"
    echo "the edit '$2' did not change $1 (stale self-test?)" >&2
    return 1
  fi
  rm -f "$file.orig"
}

# expect_pass / expect_fail PATTERN: run the check on $DIR.
run_check() { bash "$CHECK" "$DIR" >"$DIR.log" 2>&1; }
expect_pass() {
  if run_check; then ok; else not_ok "the check failed:"; tail -n 20 "$DIR.log" >&2; fi
  rm -rf "$DIR"
}
expect_fail() {
  local pattern=$1
  if run_check; then
    not_ok "the check passed on a broken copy"
  elif grep -Eq -- "$pattern" "$DIR.log"; then
    ok
  else
    not_ok "the check failed, but its output does not match /$pattern/:"
    tail -n 20 "$DIR.log" >&2
  fi
  rm -rf "$DIR"
}
# broken NAME FILE SED PATTERN: one edited file, the check must fail with PATTERN.
broken() {
  fresh "$1"
  if edit "$2" "$3"; then expect_fail "$4"; else not_ok "could not apply the edit"; rm -rf "$DIR"; fi
}

fresh "the unbroken repository passes"
expect_pass

broken "syntax error in a .nix file" \
  nix/package.nix 's/^{ lib, rustPlatform, installShellFiles }:$/{ lib, rustPlatform, installShellFiles }: {{/' \
  'syntax error in nix/package.nix'

broken "syntax error in the stub" \
  nix/stub-nixpkgs/pkgs.nix 's/^{ lib, system }:$/{ lib, system ]:/' \
  'syntax error in nix/stub-nixpkgs/pkgs.nix'

broken "flake.lock is not JSON" \
  flake.lock '$d' \
  'flake.lock is invalid'

broken "flake.lock has another version" \
  flake.lock 's/"version": 7/"version": 6/' \
  'version must be 7'

broken "flake.lock rev is not a commit hash" \
  flake.lock 's/"rev": "\([0-9a-f]*\)"/"rev": "nixos-25.11"/' \
  'rev must be 40 lowercase hex'

broken "flake.lock narHash is not an SRI hash" \
  flake.lock 's/"narHash": "sha256-/"narHash": "sha1-/' \
  'narHash must be an SRI sha256 hash'

broken "flake.lock disagrees with flake.nix's input" \
  flake.nix 's|github:NixOS/nixpkgs/nixos-25.11|github:NixOS/nixpkgs/nixos-unstable|' \
  'does not match flake.nix'

broken "flake.lock locks a second input" \
  flake.lock 's/"nixpkgs": "nixpkgs"/"nixpkgs": "nixpkgs", "extra": "nixpkgs"/' \
  'differ from flake.nix'

broken "buildRustPackage gets an argument it does not take" \
  nix/package.nix 's/cargoBuildFlags = /cargoBuildFlag = /' \
  "unexpected argument 'cargoBuildFlag'"

broken "buildRustPackage gets a wrong cargoLock" \
  nix/checks/clippy.nix 's|cargoLock.lockFile = ../../Cargo.lock;|cargoLock.lockFile = ../../Cargo.toml; cargoLock.outputHashes = { };|' \
  'cargoLock must be exactly'

broken "pullImage gets an argument it does not take" \
  nix/pinned-image-fetch.nix 's/imageDigest = pinned.digest;/digest = pinned.digest;/' \
  "unexpected argument 'digest'|without required argument 'imageDigest'"

broken "pullImage gets a malformed hash" \
  nix/pinned-image-hash.nix 's/x86_64-linux = "sha256-/x86_64-linux = "sha256:/' \
  'hash must be an SRI sha256 hash'

broken "a NixOS option that does not exist" \
  nix/checks/e2e.nix 's/virtualisation.docker.enable = true;/virtualisation.docker.enabled = true;/' \
  'unknown option'

broken "an expected output is missing" \
  flake.nix '/odek-go = pkgs.callPackage/d; s/ libodek odek-go \]/ libodek ]/; s/ odek-python odek-go;/ odek-python;/' \
  'missing output packages\.[a-z0-9_-]+\.odek-go'

broken "pullImage digest differs from default.Dockerfile's" \
  nix/pinned-image-fetch.nix "s/imageDigest = pinned.digest;/imageDigest = \"sha256:$OTHER_HEX\";/" \
  'pullImage digest sha256:[0-9a-f]+ != core/src/image/default.Dockerfile'

broken "a copy of the pinned digest in nix/" \
  nix/package.nix "1i # pinned: $HEX" \
  'a copy of the pinned digest is in: nix/package.nix'

broken "the digest was bumped but the pullImage hash was not" \
  core/src/image/default.Dockerfile "s/$HEX/$OTHER_HEX/" \
  'recorded for another digest'

broken "default.Dockerfile gains a second instruction" \
  core/src/image/default.Dockerfile '$a RUN true' \
  'exactly one instruction'

echo "nix-selftest: ${passed} passed, ${failed} failed"
(( failed == 0 ))
