# packages.<system>.odek-go: the Go module in bindings/go (package odek, cgo,
# standard library only, hence vendorHash = null), built and tested against
# libodek. The module links by `pkg-config odek` (bindings/go/link.go, the
# default) and carries its header (bindings/go/include/odek.h).
# CGO_LDFLAGS adds an rpath so the test binaries find libodek.so.
# The real-Docker tests (TestDocker*) fail rather than skip without a daemon,
# and there is none in the Nix build sandbox: they are skipped here with
# `-skip ^TestDocker` (the e2e VM check is where real Docker runs).
# The module source is installed under share/odek/go for consumers, where
# `cargo xtask dist` puts it (use it with a `replace` directive).
{ lib, buildGoModule, pkg-config, libodek }:
let
  source = import ./source.nix;
in
buildGoModule {
  pname = "odek-go";
  version = import ./version.nix;
  src = source.go;
  modRoot = "bindings/go";
  vendorHash = null;

  nativeBuildInputs = [ pkg-config ];
  buildInputs = [ libodek ];

  env = {
    CGO_ENABLED = "1";
    CGO_LDFLAGS = "-Wl,-rpath,${libodek}/lib";
  };

  checkFlags = [ "-skip=^TestDocker" ];

  postInstall = ''
    mkdir -p $out/share/odek/go
    cp -r "$NIX_BUILD_TOP/$sourceRoot/bindings/go/." $out/share/odek/go/
  '';

  meta = {
    description = "Go bindings for odek (cgo over libodek)";
    license = lib.licenses.asl20;
  };
}
