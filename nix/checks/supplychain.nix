# checks.<system>.supplychain: the tests/supplychain crate (odek-supplychain)
# over the whole repository: the pin's form, the core's default, no second
# copy of the digest anywhere, the Dependabot entries. In the build sandbox
# there is no .git, so the crate walks the tree instead of `git ls-files`
# (for a flake, the tree *is* the tracked files).
{ rustPlatform }:
let
  source = import ../source.nix;
in
rustPlatform.buildRustPackage {
  pname = "odek-supplychain";
  version = import ../version.nix;
  src = source.full;
  cargoLock.lockFile = ../../Cargo.lock;
  doCheck = false;
  buildPhase = ''
    runHook preBuild
    cargo test --offline --frozen -p odek-supplychain -j "$NIX_BUILD_CORES"
    runHook postBuild
  '';
  installPhase = ''
    runHook preInstall
    touch $out
    runHook postInstall
  '';
}
