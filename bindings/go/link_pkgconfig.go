//go:build odek_pkgconfig

package odek

// `-tags odek_pkgconfig`: compile and link flags from `pkg-config odek`
// (an odek.pc installed with the library, e.g. by the Nix package). The
// header odek.h is still also found in ../../ffi/include when building
// inside the repository.

/*
#cgo pkg-config: odek
*/
import "C"
