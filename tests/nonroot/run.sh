#!/usr/bin/env bash
# Runs the parts of the test suite that touch files, users and sockets as a
# normal user in the `docker` group, as most operators are: the e2e files of
# README's examples and of run/exec/approval/owner lifetime/the sandbox user
# and setuid, the Python binding's real-Docker tests, and `odek mcp` through
# the official MCP SDK. A suite that only ever ran as root would hide what
# fails for them (a /workspace the sandbox cannot write, a socket or a file
# it may not use).
#
#   tests/nonroot/run.sh            # as root: creates the user odek-e2e
#
# As root it creates the system user `odek-e2e` in the `docker` group (when
# missing) and runs everything as that user with `setpriv --init-groups`,
# from copies of the binaries in a private staging directory (a checkout
# under /root is not reachable by another user). Run by a normal user, the
# other steps of `cargo xtask test` already ran as that user: it says so and
# exits 0. Needs the debug build of odek, libodek and the e2e test
# binaries (cargo xtask e2e builds them; this script builds what is missing).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# This checkout's image and project names (ODEK_TEST_NS is passed on below:
# a staged copy of the repository would hash to another namespace).
# shellcheck source=tests/ns.sh
. "$REPO/tests/ns.sh"
MCP_PROJECT=odekmcpnr$ODEK_TEST_NS
TARGET=${CARGO_TARGET_DIR:-$REPO/target}
[[ $TARGET = /* ]] || TARGET=$REPO/$TARGET
USER_NAME=odek-e2e
# The e2e files run as the user (each needs the fixture and test images).
# ODEK_NONROOT_E2E="a b" picks others (a subset while developing; "" none).
read -r -a E2E_TESTS <<<"${ODEK_NONROOT_E2E-main_job sandbox_lifecycle owner_lifetime exit_codes approval operator_user project_host_run setuid sandbox_log compose_cycle}"
# ODEK_NONROOT_K="expr" runs only the Python and MCP tests pytest's -k
# selects (a subset while developing); unset: all of them.
PYTEST_K=()
[[ -n ${ODEK_NONROOT_K:-} ]] && PYTEST_K=(-k "$ODEK_NONROOT_K")

log() { echo "==> nonroot: $*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
  log "running as uid $(id -u), not root: every other step of the suite already ran as this non-root user; nothing more to do"
  exit 0
fi

if ! getent passwd "$USER_NAME" >/dev/null; then
  log "creating the system user $USER_NAME in the docker group"
  useradd --system --create-home --shell /bin/sh --groups docker "$USER_NAME"
fi
id -nG "$USER_NAME" | tr ' ' '\n' | grep -qx docker || {
  echo "nonroot: $USER_NAME is not in the docker group; fix: usermod -aG docker $USER_NAME" >&2
  exit 1
}
USER_HOME=$(getent passwd "$USER_NAME" | cut -d: -f6)
# The user's environment: its own HOME and a system PATH (root's toolchains
# under /root are out of its reach), plus the package index and proxy
# settings pip needs; no ODEK_*, no XDG_RUNTIME_DIR of root's.
USER_ENV=(PATH=/usr/local/bin:/usr/bin:/bin HOME="$USER_HOME" USER="$USER_NAME"
          LOGNAME="$USER_NAME" LANG=C.UTF-8)
while IFS='=' read -r k v; do
  case $k in
    PIP_*|SSL_CERT_*|*_CA_BUNDLE|http_proxy|https_proxy|no_proxy|HTTP_PROXY|HTTPS_PROXY|NO_PROXY|DOCKER_HOST)
      USER_ENV+=("$k=$v") ;;
  esac
done < <(env)
as_user() {
  setpriv --reuid="$USER_NAME" --regid="$USER_NAME" --init-groups -- \
    env -i "${USER_ENV[@]}" "$@"
}
# A Python the user can run (root's pyenv lives under /root).
PY=/usr/bin/python3
if ! "$PY" -m venv --help >/dev/null 2>&1; then
  log "installing python3-venv (apt) for $PY"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv
fi

log "building what the runs need (odek, libodek, the e2e test binaries)"
(cd "$REPO" && cargo build -q -p odek-cli && cargo build -q -p odek-ffi --features testing)
mapfile -t BINS < <(cd "$REPO" && env "${ODEK_CARGO_NS_ENV[@]}" cargo test -q -p odek-e2e --no-run --message-format=json 2>/dev/null |
  python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "test" in m["target"]["kind"]:
        print(m["target"]["name"] + " " + m["executable"])
')

STAGE=$(mktemp -d /tmp/odek-nonroot.XXXXXX)
chmod 755 "$STAGE"
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  "$REPO/tests/fixtures/compose/down.sh" "$MCP_PROJECT" >/dev/null 2>&1 || true
  rm -rf "$STAGE"
}
trap cleanup EXIT
mkdir "$STAGE/bin" "$STAGE/user"
cp "$TARGET/debug/odek" "$TARGET/debug/libodek.so" "$STAGE/bin/"
# odek's supervisor where an installed odek and libodek find it: beside
# them (no ODEK_SUPERVISOR reaches the user). ODEK_SUPERVISOR_BIN is the
# static one `cargo xtask` builds; without it the sandboxes say
# `supervisor=off (no odek-supervisor installed …)` and run as well.
if [[ -n ${ODEK_SUPERVISOR_BIN:-} ]]; then
  cp "$ODEK_SUPERVISOR_BIN" "$STAGE/bin/odek-supervisor"
else
  log "ODEK_SUPERVISOR_BIN is not set: the non-root suites run without odek's supervisor"
fi

# The repository as the user sees it: the checkout when it can read it,
# else a copy of what the tests read (fixtures, image scripts, the binding).
if as_user test -r "$REPO/tests/fixtures/compose/up.sh" -a -r "$REPO/bindings/python/odek/__init__.py"; then
  RREPO=$REPO
else
  log "$REPO is not readable by $USER_NAME: copying what the tests read"
  RREPO=$STAGE/repo
  mkdir -p "$RREPO/ffi" "$RREPO/bindings"
  cp -a "$REPO/tests" "$RREPO/tests"
  cp -a "$REPO/bindings/python" "$RREPO/bindings/python"
  cp -a "$REPO/ffi/include" "$RREPO/ffi/include"
  # main_job runs README's examples as written.
  cp "$REPO/README.md" "$RREPO/README.md"
  rm -rf "$RREPO/bindings/python/build" "$RREPO/tests/e2e/target"
fi
chmod -R a+rX "$STAGE"
# What the user writes (its venv) lives in a directory of its own.
chown "$USER_NAME:" "$STAGE/user"

status=0
for name in "${E2E_TESTS[@]}"; do
  exe=""
  for pair in "${BINS[@]}"; do
    [[ ${pair%% *} == "$name" ]] && exe=${pair#* }
  done
  [[ -n $exe ]] || { echo "nonroot: no e2e test binary named $name" >&2; exit 1; }
  cp "$exe" "$STAGE/bin/e2e-$name"
  log "e2e $name as $USER_NAME"
  as_user env ODEK_BIN="$STAGE/bin/odek" ODEK_REPO="$RREPO" ODEK_TEST_NS="$ODEK_TEST_NS" RUST_BACKTRACE=1 \
    "$STAGE/bin/e2e-$name" --test-threads 4 || status=1
done

log "Python binding, real-Docker tests, as $USER_NAME (a venv of its own)"
as_user "$PY" -m venv "$STAGE/user/pyenv"
as_user "$STAGE/user/pyenv/bin/pip" install -q "pytest>=7" "mcp"
as_user env ODEK_LIB="$STAGE/bin/libodek.so" ODEK_TEST_REPO="$RREPO" ODEK_TEST_NS="$ODEK_TEST_NS" PYTHONDONTWRITEBYTECODE=1 \
  PYTHONPATH="$RREPO/bindings/python" \
  "$STAGE/user/pyenv/bin/python" -m pytest -q -p no:cacheprovider -m docker "${PYTEST_K[@]}" \
  "$RREPO/bindings/python/tests" || status=1

log "odek mcp through the MCP SDK, as $USER_NAME"
"$REPO/tests/fixtures/compose/up.sh" "$MCP_PROJECT" >/dev/null
as_user env ODEK_BIN="$STAGE/bin/odek" ODEK_MCP_PROJECT="$MCP_PROJECT" ODEK_TEST_NS="$ODEK_TEST_NS" PYTHONDONTWRITEBYTECODE=1 \
  "$STAGE/user/pyenv/bin/pytest" -q -p no:cacheprovider "${PYTEST_K[@]}" "$RREPO/tests/mcp" || status=1

if [[ $status -ne 0 ]]; then
  echo "nonroot: a suite failed as the non-root user $USER_NAME (see above)" >&2
fi
exit $status
