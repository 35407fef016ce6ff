# packages.<system>.odek (the default): the `odek` CLI (crate odek-cli), built
# with rustPlatform.buildRustPackage from Cargo.lock (no git dependencies,
# so cargoLock needs no outputHashes). Its check phase runs the workspace's
# unit and fake-engine tests — everything but the real-Docker e2e suite
# (the VM check runs that) and the supplychain tests (checks.supplychain,
# which needs the whole repository, not just the Cargo workspace), minus the
# one real-Docker test of odek-ffi (checkFlags below). Its source is the
# workspace plus the docs that odek-cli's docs_sync tests read.
{ lib, rustPlatform }:
let
  source = import ./source.nix;
in
rustPlatform.buildRustPackage {
  pname = "odek";
  version = import ./version.nix;
  src = source.rustTested;
  cargoLock.lockFile = ../Cargo.lock;

  cargoBuildFlags = [ "-p" "odek-cli" ];
  cargoTestFlags = [ "--workspace" "--exclude" "odek-e2e" "--exclude" "odek-supplychain" ];
  # libtest flags (after `--`): skip what cannot run in a Nix build sandbox
  # (no Docker daemon, no network, no TTY, not root). Audited: core/src/**,
  # core/tests/*.rs, cli/src/docs_sync.rs, ffi/tests/*.rs, bench/src/stats.rs;
  # every other test uses the fake engine, a fake daemon on a Unix socket in
  # a tempdir, /bin/sh and coreutils, /proc, and files of the source tree
  # (core/clippy.toml, core/src, cli/src and the docs in source.rustTested).
  checkFlags = [
    # ffi/tests/load.rs: 16 threads launch, exec and destroy sandboxes through
    # the C ABI against the REAL Docker daemon (and tests/images/build.sh,
    # the Compose fixture); without a daemon it fails, it never skips. It
    # runs on a Docker host under `cargo xtask e2e` (`cargo xtask unit` skips
    # it the same way). The Nix e2e VM check does NOT run it:
    # nix/e2e-tests.nix compiles only odek-e2e's test binaries.
    "--skip=many_threads_launch_exec_destroy_on_one_client"
  ];

  # HOME: the sandbox's /homeless-shelter does not exist. TMPDIR: the Linux
  # sandbox's /etc/passwd gives root and the build user (uid 1000) the home
  # /build, which is also $TMPDIR; odek refuses a working directory in a
  # hidden directory of a login home (validate_workdir in
  # core/src/config/validate.rs reads /etc/passwd), and tempfile names its
  # directories `.tmpXXXXXX`, so every fake-engine test with a tempdir
  # project (core/tests/common/mod.rs) would be refused. A non-hidden
  # subdirectory avoids that without weakening the rule or skipping tests.
  preCheck = ''
    export HOME=$TMPDIR/odek-test-home
    export TMPDIR=$TMPDIR/odek-test-tmp
    mkdir -p "$HOME" "$TMPDIR"
  '';

  # The check phase builds the whole workspace in the same release directory
  # (libodek.so/.a, other members' binaries), which cargoInstallHook would
  # copy too: keep only the CLI.
  postInstall = ''
    rm -rf $out/lib
    find $out/bin -mindepth 1 ! -name odek -exec rm -rf {} +
  '';

  meta = {
    description = "Docker sandboxes for AI coding agents that reach Compose services by name";
    mainProgram = "odek";
    license = lib.licenses.asl20;
  };
}
