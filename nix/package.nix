# packages.<system>.odek (the default): the `odek` CLI (crate odek-cli), built
# with rustPlatform.buildRustPackage from Cargo.lock (no git dependencies,
# so cargoLock needs no outputHashes). Its check phase runs the workspace's
# unit and fake-engine tests — everything but the real-Docker e2e suite
# (the VM check runs that) and the supplychain tests (checks.supplychain,
# which needs the whole repository, not just the Cargo workspace).
{ lib, rustPlatform }:
let
  source = import ./source.nix;
in
rustPlatform.buildRustPackage {
  pname = "odek";
  version = import ./version.nix;
  src = source.rust;
  cargoLock.lockFile = ../Cargo.lock;

  cargoBuildFlags = [ "-p" "odek-cli" ];
  cargoTestFlags = [ "--workspace" "--exclude" "odek-e2e" "--exclude" "odek-supplychain" ];

  # Tests write approvals and scratch projects under $HOME / $TMPDIR.
  preCheck = ''
    export HOME=$TMPDIR
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
