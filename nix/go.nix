# packages.<system>.odek-go: the Go module in bindings/go (package odek, cgo,
# standard library only, hence vendorHash = null), built and tested against
# libodek. `-tags odek_pkgconfig` takes the link flags from libodek's odek.pc
# (bindings/go/link_pkgconfig.go) instead of the workspace's target/debug;
# the header comes from ffi/include, which is part of the source.
# CGO_LDFLAGS adds an rpath so the test binaries find libodek.so.
# The real-Docker tests (TestDocker*) fail rather than skip without a daemon,
# and there is none in the Nix build sandbox: they are skipped here with
# `-skip ^TestDocker` (the e2e VM check is where real Docker runs).
# The module source is installed under share/go/odek for consumers.
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

  tags = [ "odek_pkgconfig" ];
  env = {
    CGO_ENABLED = "1";
    CGO_LDFLAGS = "-Wl,-rpath,${libodek}/lib";
  };

  checkFlags = [ "-skip=^TestDocker" ];

  postInstall = ''
    mkdir -p $out/share/go/odek
    cp -r "$NIX_BUILD_TOP/$sourceRoot/bindings/go/." $out/share/go/odek/
  '';

  meta = {
    description = "Go bindings for odek (cgo over libodek)";
    license = lib.licenses.asl20;
  };
}
