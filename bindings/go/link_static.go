//go:build odek_static && !odek_pkgconfig

package odek

// `-tags odek_static`: link the workspace's static library
// target/debug/libodek.a into the binary (no libodek.so needed at run time).
// Rust's std needs libm, libdl, libpthread and libgcc_s from the system.

/*
#cgo LDFLAGS: ${SRCDIR}/../../target/debug/libodek.a -lm -ldl -lpthread -lgcc_s -lrt -lutil
*/
import "C"
