package odek

import (
	"fmt"
	"sync"
)

// ABIVersion is the C ABI version this binding is written against
// (ODEK_ABI_VERSION in odek.h). The library's odek_abi_version() is checked
// against it at first use (NewClient, Narrow, ParsePlan); a mismatch makes
// those calls fail with an error wrapping ErrABIVersion.
const ABIVersion = 1

// ExecOutputLimit is the most bytes of stdout or stderr an ExecResult
// carries (ODEK_EXEC_OUTPUT_LIMIT, 16 MiB each); beyond it the output is
// cut and StdoutTruncated / StderrTruncated are set.
const ExecOutputLimit = 16 << 20

var (
	abiOnce sync.Once
	abiErr  error
)

// checkABI compares the loaded library's ABI version with ABIVersion, once.
func checkABI() error {
	abiOnce.Do(func() { abiErr = abiMismatch(cABIVersion()) })
	return abiErr
}

func abiMismatch(got uint32) error {
	if got == ABIVersion {
		return nil
	}
	return fmt.Errorf("%w: the loaded libodek implements ABI version %d but this Go binding needs %d; "+
		"build libodek and the binding from the same odek checkout (cargo build -p odek-ffi)",
		ErrABIVersion, got, ABIVersion)
}

// LibraryABIVersion is odek_abi_version() of the loaded libodek.
func LibraryABIVersion() uint32 { return cABIVersion() }

// LibraryVersion is the odek release of the loaded libodek, e.g. "0.1.0".
func LibraryVersion() string { return cVersion() }
