package odek

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// headerDefines parses the #define lines of the module's include/odek.h
// (the header cgo compiles against; identical to ffi/include/odek.h, see
// TestModuleHeaderMatchesRepository).
func headerDefines(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("include", "odek.h"))
	if err != nil {
		t.Fatalf("read the header: %v", err)
	}
	re := regexp.MustCompile(`(?m)^#define\s+(ODEK_[A-Z0-9_]+)\s+(.+?)\s*$`)
	defs := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		defs[m[1]] = m[2]
	}
	if len(defs) == 0 {
		t.Fatal("no #define found in odek.h")
	}
	return defs
}

// headerCodes parses the ODEK_E_* members of enum odek_code_t in the
// module's include/odek.h: name -> value.
func headerCodes(t *testing.T) map[string]int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("include", "odek.h"))
	if err != nil {
		t.Fatalf("read the header: %v", err)
	}
	block := regexp.MustCompile(`(?ms)^enum odek_code_t\b.*?\{(.*?)^\};`).FindSubmatch(b)
	if block == nil {
		t.Fatal("no enum odek_code_t in odek.h")
	}
	re := regexp.MustCompile(`(?m)^\s*(ODEK_E_[A-Z0-9_]+)\s*=\s*(\d+),?\s*$`)
	codes := map[string]int{}
	for _, m := range re.FindAllSubmatch(block[1], -1) {
		n, err := strconv.Atoi(string(m[2]))
		if err != nil {
			t.Fatalf("%s = %q is not a number", m[1], m[2])
		}
		codes[string(m[1])] = n
	}
	return codes
}

// The Go code table equals the header's enum odek_code_t, as text and as
// compiled by cgo, in both directions; no ODEK_E_* is a #define any more.
func TestCodeTableMatchesHeader(t *testing.T) {
	for name := range headerDefines(t) {
		if strings.HasPrefix(name, "ODEK_E_") {
			t.Errorf("%s is a #define, not a member of enum odek_code_t", name)
		}
	}
	header := headerCodes(t)
	if len(header) < 30 {
		t.Fatalf("only %d ODEK_E_* codes parsed from the header", len(header))
	}
	goTable := map[string]int{}
	for code, name := range codeNames {
		if prev, dup := goTable[name]; dup {
			t.Errorf("%s named twice (%d, %d)", name, prev, code)
		}
		goTable[name] = code
	}
	compiled := cCodes()
	for name, v := range header {
		if g, ok := goTable[name]; !ok {
			t.Errorf("header code %s = %d has no Go constant", name, v)
		} else if g != v {
			t.Errorf("%s: header %d, Go %d", name, v, g)
		}
		if c, ok := compiled[name]; !ok || c != v {
			t.Errorf("%s: header %d, cgo-compiled %d (present %v)", name, v, c, ok)
		}
	}
	for name, g := range goTable {
		if _, ok := header[name]; !ok {
			t.Errorf("Go constant %s = %d is not in the header", name, g)
		}
	}
	for name := range compiled {
		if _, ok := header[name]; !ok {
			t.Errorf("cCodes lists %s, not in the header", name)
		}
	}
	// Each code's class follows from its area, as the header documents.
	for code := range codeNames {
		if got := classOfArea(code); got == "" {
			t.Errorf("code %d is in no documented area", code)
		}
	}
}

func classOfArea(code int) string {
	switch code / 100 {
	case 1:
		return ClassUsage
	case 2, 3:
		return ClassConfig
	case 4:
		return ClassDockerRejected
	case 5:
		return ClassImageUnavailable
	case 6:
		return ClassDaemonUnreachable
	case 7:
		return ClassCancelled
	}
	return ""
}

// The ABI version: header text, cgo-compiled header, the loaded library and
// this binding agree; a mismatch is a clear error wrapping ErrABIVersion.
func TestABIVersion(t *testing.T) {
	defs := headerDefines(t)
	v, err := strconv.Atoi(defs["ODEK_ABI_VERSION"])
	if err != nil {
		t.Fatalf("ODEK_ABI_VERSION = %q", defs["ODEK_ABI_VERSION"])
	}
	if v != ABIVersion || cHeaderABIVersion != ABIVersion {
		t.Fatalf("header ABI %d, cgo-compiled %d, binding %d", v, cHeaderABIVersion, ABIVersion)
	}
	if got := LibraryABIVersion(); got != ABIVersion {
		t.Fatalf("odek_abi_version() = %d, binding %d", got, ABIVersion)
	}
	if err := checkABI(); err != nil {
		t.Fatalf("checkABI: %v", err)
	}
	if LibraryVersion() == "" {
		t.Error("odek_version() is empty")
	}
	err = abiMismatch(ABIVersion + 1)
	if !errors.Is(err, ErrABIVersion) {
		t.Fatalf("mismatch error does not wrap ErrABIVersion: %v", err)
	}
	for _, want := range []string{"ABI version 2", "needs 1", "cargo build -p odek-ffi"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("mismatch error %q lacks %q", err, want)
		}
	}
}

func TestFileLimitsMatchHeader(t *testing.T) {
	if cFileReadLimit != FileReadLimit || cFileWriteLimit != FileWriteLimit {
		t.Fatalf("ODEK_FILE_READ_LIMIT %d / ODEK_FILE_WRITE_LIMIT %d, Go %d / %d",
			cFileReadLimit, cFileWriteLimit, FileReadLimit, FileWriteLimit)
	}
}

func TestExecOutputLimitMatchesHeader(t *testing.T) {
	if cExecOutputLimit != ExecOutputLimit {
		t.Fatalf("ODEK_EXEC_OUTPUT_LIMIT %d, Go %d", cExecOutputLimit, ExecOutputLimit)
	}
}

// A panic inside libodek is an error object (class usage), not a crash.
func TestPanicIsAnError(t *testing.T) {
	err, ok := cDebugPanic()
	if !ok {
		t.Fatal("libodek exports no odek_debug_panic: build it with --features testing (run-tests.sh does)")
	}
	wantCode(t, err, CodePanic, ClassUsage, ErrUsage)
}

func TestErrorString(t *testing.T) {
	e := &Error{Code: CodeNetworkMode, Class: ClassConfig, Message: "sandbox_network must be none or bridge"}
	if got, want := e.Error(), "odek: sandbox_network must be none or bridge (config, code 202)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if CodeName(CodeNetworkMode) != "ODEK_E_NETWORK_MODE" || CodeName(999) != "" {
		t.Error("CodeName")
	}
	if errors.Is(e, &Error{Code: CodeConfig}) {
		t.Error("different codes matched")
	}
	var nilErr *Error
	if errors.Is(e, nilErr) {
		t.Error("nil *Error matched")
	}
}

// The module carries its own copy of the header so it builds outside the
// repository; inside it, the copy must equal ffi/include/odek.h byte for
// byte (`cargo xtask header` writes both, `cargo xtask header-check` fails on
// drift too). Outside the repository there is nothing to compare with.
func TestModuleHeaderMatchesRepository(t *testing.T) {
	repo := filepath.Join(repoRoot(t), "ffi", "include", "odek.h")
	want, err := os.ReadFile(repo)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("not inside the odek repository (%s missing): nothing to compare", repo)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("include", "odek.h"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("bindings/go/include/odek.h differs from ffi/include/odek.h: run `cargo xtask header`")
	}
}
