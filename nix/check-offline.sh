#!/usr/bin/env bash
# Offline check of odek's Nix flake, for machines that can evaluate Nix but
# never build or fetch (Debian's nix-bin 2.8 is enough). Exits non-zero on
# the first failure. Steps:
#   1. parse   every .nix file (nix-instantiate --parse); bash -n every nix/**/*.sh
#   2. lock    flake.lock's structure against flake.nix's inputs (nix/check-lock.nix)
#   3. eval    the flake's outputs against nix/stub-nixpkgs (a STUB with strict
#              signatures, via --override-input): expected outputs present,
#              every package/check/devShell instantiates
#   4. check   `nix flake check --no-build` with the same override
#   5. pin     the digest the flake hands to dockerTools.pullImage (and its
#              name and tag) equal core/src/image/default.Dockerfile's, and no
#              Nix file or docs/NIX.md carries a copy of the digest
#
# Usage: bash nix/check-offline.sh [REPO_ROOT]   (default: this script's repo)
# The files checked are those git would track (`git ls-files --cached
# --others --exclude-standard`), copied to a temporary directory; outside a
# git work tree, every file except target/, .git/ and result*.
# Nothing is written to /nix or $HOME: the store, state and caches live in a
# temporary directory (chroot store via --store), substituters are off, and
# --offline is set — no network is used.
set -euo pipefail

ROOT=$(cd "${1:-$(dirname "${BASH_SOURCE[0]}")/..}" && pwd)
SYSTEMS=(x86_64-linux aarch64-linux x86_64-darwin aarch64-darwin)
E2E_SYSTEM=x86_64-linux

step() { echo "==> $*" >&2; }
die() { echo "check-offline: FAIL: $*" >&2; exit 1; }

command -v nix >/dev/null || die "nix is not installed (Debian: apt-get install nix-bin)"
command -v nix-instantiate >/dev/null || die "nix-instantiate is not installed"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/odek-nix-check.XXXXXX")
cleanup() { chmod -R u+w "$WORK" 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
SRC=$WORK/src
STORE=$WORK/store
mkdir -p "$SRC" "$WORK/home" "$WORK/cache" "$WORK/config"
export HOME=$WORK/home XDG_CACHE_HOME=$WORK/cache XDG_CONFIG_HOME=$WORK/config
# Nothing is ever built here, so no build users are needed: without this, a
# root nix on a machine lacking the `nixbld` group warns on every call.
export NIX_CONFIG="build-users-group ="
unset NIX_PATH NIX_REMOTE

# --- stage the files ---------------------------------------------------------
if git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  # shellcheck disable=SC2016  # $f is expanded by the inner sh
  (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) \
    | (cd "$ROOT" && xargs -0 -r sh -c 'for f; do [ -e "$f" ] || [ -L "$f" ] && printf "%s\0" "$f"; done' sh) \
    | tar -C "$ROOT" --null -T - -cf - | tar -C "$SRC" -xf -
else
  (cd "$ROOT" && find . \( -name .git -o -path ./target -o -name 'result' -o -name 'result-*' \) -prune -o \
      \( -type f -o -type l \) -print0) | tar -C "$ROOT" --null -T - -cf - | tar -C "$SRC" -xf -
fi
[[ -f $SRC/flake.nix ]] || die "no flake.nix in $ROOT"
cd "$SRC"

NIX_FLAGS=(
  --store "$STORE"
  --extra-experimental-features "nix-command flakes"
  --option substituters ""
  --option flake-registry ""
  --option allow-import-from-derivation false
  --offline
)
FLAKE_FLAGS=(--no-write-lock-file --override-input nixpkgs "path:$SRC/nix/stub-nixpkgs")
FLAKE="path:$SRC"
nixc() { nix "${NIX_FLAGS[@]}" "$@"; }
# Evaluate an attribute of the flake (against the stub), quietly.
feval() { nixc eval "${FLAKE_FLAGS[@]}" "$@" 2> >(grep -v -e "^warning: not writing modified lock file" \
  -e "^• Updated input 'nixpkgs'" -e "^    '.*' (.*)$" -e "^  → 'path:.*stub-nixpkgs" >&2); }

# --- 1. parse ------------------------------------------------------------------
step "parse: every .nix file"
mapfile -d '' nixfiles < <(find . -name '*.nix' -not -path './target/*' -print0 | sort -z)
(( ${#nixfiles[@]} )) || die "no .nix files found"
for f in "${nixfiles[@]}"; do
  nix-instantiate --store "$STORE" --parse "$f" >/dev/null || die "syntax error in ${f#./}"
done
mapfile -d '' shfiles < <(find ./nix -name '*.sh' -print0 | sort -z)
for f in "${shfiles[@]}"; do
  bash -n "$f" || die "shell syntax error in ${f#./}"
done
echo "    ${#nixfiles[@]} Nix files and ${#shfiles[@]} shell scripts parse" >&2

# --- 2. lock -------------------------------------------------------------------
step "lock: flake.lock structure"
[[ -f flake.lock ]] || die "flake.lock is missing"
out=$(nix-instantiate --store "$STORE" --eval --strict nix/check-lock.nix --arg root "$SRC" 2>&1) \
  || die "flake.lock is invalid: $out"
[[ $out == true ]] || die "flake.lock check returned $out"

# --- 3. eval -------------------------------------------------------------------
step "eval: outputs against nix/stub-nixpkgs (a stub; nothing is built)"
sys_list="[ $(printf '"%s" ' "${SYSTEMS[@]}") ]"
# expect OUTPUT NAMES...: every system's OUTPUT set has NAMES, all instantiable.
expect() {
  local output=$1; shift
  local names out
  names="[ $(printf '"%s" ' "$@") ]"
  out=$(feval --json "$FLAKE#$output" --apply "sets: builtins.all (s:
      let set = sets.\${s} or (throw \"no $output.\${s}\"); in
      builtins.all (n: set ? \${n} || throw \"missing output $output.\${s}.\${n}\") $names
      && builtins.all (n: builtins.isString (set.\${n}.drvPath or set.\${n}.program))
           (builtins.attrNames set)) $sys_list" 2>&1) || die "evaluating $output failed:
$out"
  [[ $(tail -n 1 <<<"$out") == true ]] || die "evaluating $output returned: $out"
}
expect packages default odek libodek odek-python odek-go dist
expect apps default odek
expect devShells default
expect checks odek libodek odek-python odek-go clippy fmt supplychain
out=$(feval --json "$FLAKE#checks.$E2E_SYSTEM.e2e.drvPath" 2>&1) || die "checks.$E2E_SYSTEM.e2e does not evaluate:
$out"
for s in "${SYSTEMS[@]}"; do
  prog=$(feval --raw "$FLAKE#apps.$s.odek.program") || die "apps.$s.odek.program does not evaluate"
  pkg=$(feval --raw "$FLAKE#packages.$s.odek.outPath") || die "packages.$s.odek does not evaluate"
  [[ $prog == "$pkg/bin/odek" ]] || die "apps.$s.odek runs $prog, not $pkg/bin/odek"
done
main=$(feval --raw "$FLAKE#packages.$E2E_SYSTEM.odek.meta.mainProgram") || die "packages.$E2E_SYSTEM.odek has no meta.mainProgram"
[[ $main == odek ]] || die "packages.$E2E_SYSTEM.odek's meta.mainProgram is $main, not odek"

# --- 4. nix flake check --no-build -----------------------------------------------
step "check: nix flake check --no-build (against the stub)"
out=$(nixc flake check --no-build "${FLAKE_FLAGS[@]}" "$FLAKE" 2>&1) || die "nix flake check failed:
$out"
if grep -E "^(warning|error):" <<<"$out" | grep -v "not writing modified lock file" >&2; then
  die "nix flake check printed warnings (above)"
fi

# --- 5. pin --------------------------------------------------------------------
step "pin: the flake's alpine equals core/src/image/default.Dockerfile's"
dockerfile=core/src/image/default.Dockerfile
[[ -f $dockerfile ]] || die "$dockerfile is missing"
from=$(grep -Ev '^[[:space:]]*(#|$)' "$dockerfile" | tr -d '\r')
[[ $(wc -l <<<"$from") == 1 ]] || die "$dockerfile must hold exactly one instruction"
re='^[[:space:]]*[Ff][Rr][Oo][Mm][[:space:]]+(([^@[:space:]:]+):([^@[:space:]]+)@(sha256:[0-9a-f]{64}))[[:space:]]*$'
[[ $from =~ $re ]] || die "$dockerfile: expected FROM <name>:<tag>@sha256:<64 hex>, found: $from"
ref=${BASH_REMATCH[1]} name=${BASH_REMATCH[2]} tag=${BASH_REMATCH[3]} digest=${BASH_REMATCH[4]}

img="$FLAKE#legacyPackages.$E2E_SYSTEM.odek-test-images.pinned-alpine"
got_digest=$(feval --raw "$img.imageDigest") || die "cannot evaluate the pinned image's imageDigest"
got_name=$(feval --raw "$img.imageName") || die "cannot evaluate the pinned image's imageName"
got_tag=$(feval --raw "$img.imageTag") || die "cannot evaluate the pinned image's imageTag"
got_ref=$(feval --raw "$FLAKE#legacyPackages.$E2E_SYSTEM.pinned-image.reference") || die "cannot evaluate legacyPackages.$E2E_SYSTEM.pinned-image.reference"
[[ $got_digest == "$digest" ]] || die "pullImage digest $got_digest != $dockerfile's $digest"
[[ $got_name == "$name" ]] || die "pullImage image name $got_name != $dockerfile's $name"
[[ $got_tag == "$tag" ]] || die "pullImage tag $got_tag != $dockerfile's $tag"
[[ $got_ref == "$ref" ]] || die "legacyPackages.$E2E_SYSTEM.pinned-image.reference $got_ref != $dockerfile's $ref"

hex=${digest#sha256:}
copies=$(grep -rIlis -- "$hex" flake.nix flake.lock nix docs/NIX.md 2>/dev/null || true)
[[ -z $copies ]] || die "a copy of the pinned digest is in: $copies (it belongs only in $dockerfile)"
echo "    pullImage uses $ref" >&2

step "offline flake check passed"
