//go:build !odek_static && !odek_pkgconfig

package odek

// Default linking: the shared library libodek.so from the workspace's debug
// build (`cargo build -p odek-ffi` → target/debug), found at run time through
// an rpath, so `go test` and `go run` work without LD_LIBRARY_PATH.
//
// Why the shared library by default: the debug libodek.a is ~230 MB and every
// test binary (one per package, plus -race variants) would copy what it uses
// of it; linking the .so takes a fraction of a second and keeps one copy.
// Build with `-tags odek_static` to link libodek.a instead (a self-contained
// binary), or `-tags odek_pkgconfig` to take the flags from `pkg-config odek`
// (an installed or Nix-provided library). Extra flags can always be added
// with CGO_CFLAGS / CGO_LDFLAGS; a -L given there is searched before this one.

/*
#cgo LDFLAGS: -L${SRCDIR}/../../target/debug -Wl,-rpath,${SRCDIR}/../../target/debug -lodek
*/
import "C"
