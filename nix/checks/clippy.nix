# checks.<system>.clippy: `cargo clippy --workspace --all-targets -D warnings`
# (the same as `cargo xtask lint`), offline against the vendored Cargo.lock.
{ rustPlatform, clippy }:
let
  source = import ../source.nix;
in
rustPlatform.buildRustPackage {
  pname = "odek-clippy";
  version = import ../version.nix;
  src = source.rust;
  cargoLock.lockFile = ../../Cargo.lock;
  nativeBuildInputs = [ clippy ];
  doCheck = false;
  buildPhase = ''
    runHook preBuild
    cargo clippy --workspace --all-targets --offline --frozen -j "$NIX_BUILD_CORES" -- -D warnings
    runHook postBuild
  '';
  installPhase = ''
    runHook preInstall
    touch $out
    runHook postInstall
  '';
}
