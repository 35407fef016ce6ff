//go:build odek_static

package odek

// `-tags odek_static`: link libodek.a into the binary, with the flags from
// `pkg-config odek-static` (its Libs name the archive by path and add what
// Rust's std needs from the system: libpthread, libdl, libm, librt,
// libutil, libgcc_s). The resulting program needs no libodek.so.

/*
#cgo pkg-config: odek-static
*/
import "C"
