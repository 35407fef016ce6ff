# The real-Docker e2e suite (tests/e2e, crate odek-e2e) compiled once with
# `cargo test --no-run`, so the VM check can run the very same test binaries
# with no Rust toolchain in the VM. Output:
#   libexec/odek-e2e/<test binary>...   every test executable cargo built
#   share/odek-e2e/source               link to the source tree: the suite
#                                       reads its scripts and Compose fixture
#                                       from the tree ODEK_REPO names
#                                       (tests/e2e/src/lib.rs), a writable
#                                       copy of this one (nix/e2e/run-suite.sh)
{ rustPlatform, jq }:
let
  source = import ./source.nix;
in
rustPlatform.buildRustPackage {
  pname = "odek-e2e-tests";
  version = import ./version.nix;
  src = source.rust;
  cargoLock.lockFile = ../Cargo.lock;
  nativeBuildInputs = [ jq ];
  doCheck = false;
  buildPhase = ''
    runHook preBuild
    # The test namespace compiled into the suite (tests/e2e/build.rs): the VM
    # loads nix/test-images.nix's images, named odek-test-nix/….
    export ODEK_TEST_NS=nix
    cargo test --release --offline --frozen -p odek-e2e --no-run -j "$NIX_BUILD_CORES" \
      --message-format=json-render-diagnostics > cargo-messages.json
    runHook postBuild
  '';
  installPhase = ''
    runHook preInstall
    mkdir -p $out/libexec/odek-e2e $out/share/odek-e2e
    jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null) | .executable' \
      cargo-messages.json | while read -r exe; do
      install -m755 "$exe" $out/libexec/odek-e2e/
    done
    [ -n "$(ls $out/libexec/odek-e2e)" ] || { echo "no e2e test binaries were built" >&2; exit 1; }
    ln -s ${source.rust} $out/share/odek-e2e/source
    runHook postInstall
  '';
}
