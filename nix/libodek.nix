# packages.<system>.libodek: odek's C ABI (crate odek-ffi, library name
# `odek`): lib/libodek.so (cdylib), lib/libodek.a (staticlib), the checked-in
# include/odek.h and lib/pkgconfig/odek.pc + odek-static.pc — the lib/ and
# include/ part of `cargo xtask dist`'s layout, with the same .pc files (made
# from the same templates, ffi/odek.pc.in and ffi/odek-static.pc.in).
{ lib, rustPlatform }:
let
  source = import ./source.nix;
  version = import ./version.nix;
in
rustPlatform.buildRustPackage {
  pname = "libodek";
  inherit version;
  src = source.rust;
  cargoLock.lockFile = ../Cargo.lock;

  cargoBuildFlags = [ "-p" "odek-ffi" ];
  cargoTestFlags = [ "-p" "odek-ffi" ];
  # ffi/tests/load.rs's load test needs the real Docker daemon and never
  # skips; it runs under `cargo xtask e2e` (see checkFlags in ./package.nix).
  checkFlags = [ "--skip=many_threads_launch_exec_destroy_on_one_client" ];

  # The same test environment as ./package.nix (see there for why TMPDIR is
  # moved), so odek-ffi's tests run alike in both checks.
  preCheck = ''
    export HOME=$TMPDIR/odek-test-home
    export TMPDIR=$TMPDIR/odek-test-tmp
    mkdir -p "$HOME" "$TMPDIR"
  '';

  # cargoInstallHook copies the release directory's *.so / *.a into $out/lib;
  # copy them here too in case that hook's layout changes, then add the
  # header and the pkg-config files (relocatable: prefix=${pcfiledir}/../..).
  postInstall = ''
    mkdir -p $out/lib $out/include $out/lib/pkgconfig
    for f in libodek.so libodek.a; do
      if [ ! -e "$out/lib/$f" ]; then
        found=$(find target -path "*/release/$f" -print -quit)
        [ -n "$found" ] || { echo "libodek: $f was not built" >&2; exit 1; }
        install -m644 "$found" "$out/lib/$f"
      fi
    done
    install -m644 ffi/include/odek.h $out/include/odek.h
    for pc in odek odek-static; do
      substitute ffi/$pc.pc.in $out/lib/pkgconfig/$pc.pc --replace-fail @VERSION@ ${version}
    done
  '';

  meta = {
    description = "odek's C ABI (libodek.so, libodek.a, odek.h, odek.pc)";
    license = lib.licenses.asl20;
  };
}
