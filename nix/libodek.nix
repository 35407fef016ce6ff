# packages.<system>.libodek: odek's C ABI (crate odek-ffi, library name
# `odek`): lib/libodek.so (cdylib), lib/libodek.a (staticlib), the checked-in
# include/odek.h and lib/pkgconfig/odek.pc.
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
  # header and a pkg-config file (Libs.private: what Rust's std needs when
  # linking libodek.a statically).
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
    cat > $out/lib/pkgconfig/odek.pc <<PC
    prefix=$out
    libdir=\''${prefix}/lib
    includedir=\''${prefix}/include

    Name: odek
    Description: odek C ABI: Docker sandboxes for AI coding agents
    Version: ${version}
    Libs: -L\''${libdir} -lodek
    Libs.private: -lpthread -ldl -lm -lrt -lutil
    Cflags: -I\''${includedir}
    PC
  '';

  meta = {
    description = "odek's C ABI (libodek.so, libodek.a, odek.h, odek.pc)";
    license = lib.licenses.asl20;
  };
}
