//go:build !odek_static

package odek

// Default linking: the shared library, with the flags from `pkg-config odek`.
// The header is part of this module (include/odek.h, a copy of the
// repository's ffi/include/odek.h that `cargo xtask header-check` and
// TestModuleHeaderMatchesRepository keep identical), so only the library
// comes from outside: point PKG_CONFIG_PATH at the lib/pkgconfig directory of
// an installed prefix (`cargo xtask dist` makes one; the Nix package libodek
// is one). The program then needs libodek.so at run time: add
// CGO_LDFLAGS="-Wl,-rpath,$PREFIX/lib" when building, or set
// LD_LIBRARY_PATH, or build with `-tags odek_static` (pkg-config odek-static:
// libodek.a linked in, nothing needed at run time).
//
// Nothing here points into a Cargo target directory: bindings/go/run-tests.sh
// writes a pkg-config file for the workspace's debug build and sets
// PKG_CONFIG_PATH to it for the in-repository tests.

/*
#cgo pkg-config: odek
*/
import "C"
