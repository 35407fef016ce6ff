# shellcheck shell=bash
# Per-checkout names for everything the tests create on the Docker daemon, so
# two checkouts (two branches, a clone next to CI) sharing one daemon never
# overwrite each other's images or Compose projects. Source it after setting
# REPO (the checkout root); it sets and exports:
#   ODEK_TEST_NS       8 hex digits: SHA-256 of the canonical checkout root
#                      (`cargo xtask` exports the same value; a set value wins)
#   ODEK_TEST_IMAGES   image repository prefix, e.g. odek-test-1a2b3c4d
#                      (images: $ODEK_TEST_IMAGES/base:1, /redis:1, ...)
#   ODEK_TEST_PROJECT  the e2e Compose project, e.g. odeke2e1a2b3c4d
#   ODEK_TEST_NS_LABEL the label on this checkout's test images and networks
# and, not exported, ODEK_TEST_NS_DEFAULT (the hash) and ODEK_CARGO_NS_ENV.
# The same rule lives in xtask/src/ns.rs, tests/e2e/src/lib.rs (test_ns),
# bindings/python/tests/conftest.py, tests/mcp/test_mcp.py and
# bindings/go/helpers_test.go.
: "${REPO:?tests/ns.sh: set REPO to the checkout root first}"
ODEK_TEST_NS_DEFAULT=$(printf '%s' "$(cd "$REPO" && pwd -P)" | sha256sum | cut -c1-8)
ODEK_TEST_NS=${ODEK_TEST_NS:-$ODEK_TEST_NS_DEFAULT}
# For cargo: the e2e crate compiles the namespace in (tests/e2e/build.rs) and
# is rebuilt whenever ODEK_TEST_NS changes, unset to set included, so cargo
# gets it only when it is not the default (as xtask's cargo does):
#   env "${ODEK_CARGO_NS_ENV[@]}" cargo test -p odek-e2e ...
# shellcheck disable=SC2034  # used by the scripts that source this file
ODEK_CARGO_NS_ENV=()
if [[ $ODEK_TEST_NS == "$ODEK_TEST_NS_DEFAULT" ]]; then
  # shellcheck disable=SC2034
  ODEK_CARGO_NS_ENV=(-u ODEK_TEST_NS)
fi
ODEK_TEST_IMAGES=odek-test-$ODEK_TEST_NS
ODEK_TEST_PROJECT=odeke2e$ODEK_TEST_NS
ODEK_TEST_NS_LABEL=dev.odek.test.ns=$ODEK_TEST_NS
export ODEK_TEST_NS ODEK_TEST_IMAGES ODEK_TEST_PROJECT ODEK_TEST_NS_LABEL
