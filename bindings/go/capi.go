package odek

// The only file that calls C. Every function here copies what odek returns
// into Go memory and frees the C side before returning (SPEC §10.2):
//
//   - string arguments: C.CString, freed with C.free when the call returns;
//   - strings returned through out-params: C.GoString, then odek_string_free;
//   - error objects: code, class and message copied, then odek_error_free.
//
// Handles (odek_client_t*, odek_sandbox_t*) are IDs in disguise, never real
// memory (see the header). They are kept on the Go side as uintptr, not as
// pointer types, so the Go garbage collector never sees a fake pointer, and
// converted back in the small C wrappers below. Because a uintptr does not
// keep its owner alive, the methods of Client and Sandbox call
// runtime.KeepAlive on their receiver after each call, so a finalizer cannot
// free a handle while C is using it.

/*
#cgo CFLAGS: -I${SRCDIR}/include
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include "odek.h"

// odek_debug_panic exists only in test builds of libodek (cargo feature
// testing): looked up at run time so that the package links against a
// release library, which does not export it. *found is 0 when it is absent.
static odek_error_t *godek_debug_panic(int *found) {
	odek_error_t *(*f)(void) = (odek_error_t *(*)(void))dlsym(RTLD_DEFAULT, "odek_debug_panic");
	*found = f != NULL;
	return f != NULL ? f() : NULL;
}

static odek_error_t *godek_client_new(const char *opts, uintptr_t *out) {
	odek_client_t *c = NULL;
	odek_error_t *e = odek_client_new(opts, &c);
	if (e == NULL) *out = (uintptr_t)c;
	return e;
}
static odek_error_t *godek_client_free(uintptr_t c) {
	return odek_client_free((odek_client_t *)c);
}
static odek_error_t *godek_resolve(uintptr_t c, const char *req, uintptr_t k, char **out) {
	return odek_resolve_cancellable((const odek_client_t *)c, req, (const odek_cancel_t *)k, out);
}
static odek_error_t *godek_approve(uintptr_t c, const char *plan, const char *d, char **out) {
	return odek_approve((const odek_client_t *)c, plan, d, out);
}
static odek_error_t *godek_launch(uintptr_t c, const char *plan, const char *appr, uintptr_t k, uintptr_t *out) {
	odek_sandbox_t *s = NULL;
	odek_error_t *e = odek_launch_cancellable((const odek_client_t *)c, plan, appr, (const odek_cancel_t *)k, &s);
	if (e == NULL) *out = (uintptr_t)s;
	return e;
}
static odek_error_t *godek_config_view(uintptr_t c, const char *plan, uintptr_t k, char **out) {
	return odek_config_view_cancellable((const odek_client_t *)c, plan, (const odek_cancel_t *)k, out);
}
static odek_error_t *godek_sandbox_info(uintptr_t s, char **out) {
	return odek_sandbox_info((const odek_sandbox_t *)s, out);
}
static odek_error_t *godek_describe(uintptr_t s, uintptr_t k, char **env, char **prompt, char **tool) {
	return odek_describe_cancellable((const odek_sandbox_t *)s, (const odek_cancel_t *)k, env, prompt, tool);
}
static odek_error_t *godek_exec(uintptr_t s, const char *req, uintptr_t k, char **out) {
	return odek_exec_cancellable((const odek_sandbox_t *)s, req, (const odek_cancel_t *)k, out);
}
static odek_error_t *godek_read_file(uintptr_t s, const char *req, uintptr_t k, char **out) {
	return odek_read_file((const odek_sandbox_t *)s, req, (const odek_cancel_t *)k, out);
}
static odek_error_t *godek_write_file(uintptr_t s, const char *req, uintptr_t k, char **out) {
	return odek_write_file((const odek_sandbox_t *)s, req, (const odek_cancel_t *)k, out);
}
static odek_error_t *godek_edit_file(uintptr_t s, const char *req, uintptr_t k, char **out) {
	return odek_edit_file((const odek_sandbox_t *)s, req, (const odek_cancel_t *)k, out);
}
static odek_error_t *godek_list_directory(uintptr_t s, const char *req, uintptr_t k, char **out) {
	return odek_list_directory((const odek_sandbox_t *)s, req, (const odek_cancel_t *)k, out);
}
// The output callback of odek_exec_stream: hands each chunk to the Go
// function godekStreamOutput (stream.go), user_data being a cgo.Handle.
extern void godekStreamOutput(uintptr_t user, int32_t stream, uint8_t *bytes, size_t len);
static void godek_on_output(void *user, int32_t stream, const uint8_t *bytes, size_t len) {
	godekStreamOutput((uintptr_t)user, stream, (uint8_t *)bytes, len);
}
static odek_error_t *godek_exec_stream(uintptr_t s, const char *req, uintptr_t k, uintptr_t user, char **out) {
	return odek_exec_stream((const odek_sandbox_t *)s, req, (const odek_cancel_t *)k, godek_on_output,
				(void *)user, out);
}
static odek_error_t *godek_exec_stream_stdin(uintptr_t s, const char *req, uintptr_t k, uintptr_t p, uintptr_t user,
					     char **out) {
	return odek_exec_stream_stdin((const odek_sandbox_t *)s, req, (const odek_cancel_t *)k, (const odek_stdin_t *)p,
				      godek_on_output, (void *)user, out);
}
static uintptr_t godek_stdin_new(void) {
	return (uintptr_t)odek_stdin_new();
}
static odek_error_t *godek_stdin_write(uintptr_t p, const uint8_t *bytes, size_t len) {
	return odek_stdin_write((const odek_stdin_t *)p, bytes, len);
}
static odek_error_t *godek_stdin_close(uintptr_t p) {
	return odek_stdin_close((const odek_stdin_t *)p);
}
static odek_error_t *godek_stdin_free(uintptr_t p) {
	return odek_stdin_free((odek_stdin_t *)p);
}
static uintptr_t godek_cancel_new(void) {
	return (uintptr_t)odek_cancel_new();
}
static odek_error_t *godek_cancel(uintptr_t k) {
	return odek_cancel((const odek_cancel_t *)k);
}
static odek_error_t *godek_cancel_free(uintptr_t k) {
	return odek_cancel_free((odek_cancel_t *)k);
}
static odek_error_t *godek_sandbox_destroy(uintptr_t s) {
	return odek_sandbox_destroy((odek_sandbox_t *)s);
}
static odek_error_t *godek_sandbox_close(uintptr_t s, char **out) {
	return odek_sandbox_close((odek_sandbox_t *)s, out);
}
*/
import "C"

import "unsafe"

// takeError turns an odek_error_t* into a Go error (nil for NULL) and frees it.
func takeError(e *C.odek_error_t) error {
	if e == nil {
		return nil
	}
	err := &Error{
		Code:    int(C.odek_error_code(e)),
		Class:   C.GoString(C.odek_error_class(e)),
		Message: C.GoString(C.odek_error_message(e)),
	}
	C.odek_error_free(e)
	return err
}

// takeString copies a string odek returned and frees it.
func takeString(s *C.char) string {
	if s == nil {
		return ""
	}
	g := C.GoString(s)
	C.odek_string_free(s)
	return g
}

// cstr copies a Go string into C memory; the caller frees it with freeC.
func cstr(s string) *C.char { return C.CString(s) }

func freeC(p *C.char) { C.free(unsafe.Pointer(p)) }

func cABIVersion() uint32 { return uint32(C.odek_abi_version()) }

func cVersion() string { return C.GoString(C.odek_version()) } // static: not freed

// cDebugPanic calls odek_debug_panic (test builds of libodek only); ok is
// false when the loaded library does not export it.
func cDebugPanic() (err error, ok bool) {
	var found C.int
	e := C.godek_debug_panic(&found)
	return takeError(e), found != 0
}

func cClientNew(optionsJSON string) (uintptr, error) {
	o := cstr(optionsJSON)
	defer freeC(o)
	var h C.uintptr_t
	if err := takeError(C.godek_client_new(o, &h)); err != nil {
		return 0, err
	}
	return uintptr(h), nil
}

func cClientFree(h uintptr) error {
	return takeError(C.godek_client_free(C.uintptr_t(h)))
}

// cCancelNew makes a cancel handle (odek_cancel_new); 0 stands for NULL
// (not cancellable) in the c* functions below.
func cCancelNew() uintptr { return uintptr(C.godek_cancel_new()) }

// cCancel stops every call given the handle (odek_cancel).
func cCancel(k uintptr) error { return takeError(C.godek_cancel(C.uintptr_t(k))) }

// cCancelFree frees the handle (odek_cancel_free).
func cCancelFree(k uintptr) error { return takeError(C.godek_cancel_free(C.uintptr_t(k))) }

func cResolve(h uintptr, requestJSON string, cancel uintptr) (string, error) {
	r := cstr(requestJSON)
	defer freeC(r)
	var out *C.char
	if err := takeError(C.godek_resolve(C.uintptr_t(h), r, C.uintptr_t(cancel), &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cApprovalRequest(planJSON string) (string, error) {
	p := cstr(planJSON)
	defer freeC(p)
	var out *C.char
	if err := takeError(C.odek_plan_approval_request(p, &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cApprove(h uintptr, planJSON, decision string) (string, error) {
	p, d := cstr(planJSON), cstr(decision)
	defer freeC(p)
	defer freeC(d)
	var out *C.char
	if err := takeError(C.godek_approve(C.uintptr_t(h), p, d, &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cLaunch(h uintptr, planJSON, approvalJSON string, cancel uintptr) (uintptr, error) {
	p, a := cstr(planJSON), cstr(approvalJSON)
	defer freeC(p)
	defer freeC(a)
	var s C.uintptr_t
	if err := takeError(C.godek_launch(C.uintptr_t(h), p, a, C.uintptr_t(cancel), &s)); err != nil {
		return 0, err
	}
	return uintptr(s), nil
}

func cConfigView(h uintptr, planJSON string, cancel uintptr) (string, error) {
	p := cstr(planJSON)
	defer freeC(p)
	var out *C.char
	if err := takeError(C.godek_config_view(C.uintptr_t(h), p, C.uintptr_t(cancel), &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cNarrow(parentJSON, requestJSON string) (string, error) {
	p, r := cstr(parentJSON), cstr(requestJSON)
	defer freeC(p)
	defer freeC(r)
	var out *C.char
	if err := takeError(C.odek_narrow(p, r, &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cSandboxInfo(s uintptr) (string, error) {
	var out *C.char
	if err := takeError(C.godek_sandbox_info(C.uintptr_t(s), &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cDescribe(s uintptr, cancel uintptr) (env, prompt, tool string, err error) {
	var e, p, t *C.char
	if err := takeError(C.godek_describe(C.uintptr_t(s), C.uintptr_t(cancel), &e, &p, &t)); err != nil {
		return "", "", "", err
	}
	return takeString(e), takeString(p), takeString(t), nil
}

func cExec(s uintptr, requestJSON string, cancel uintptr) (string, error) {
	r := cstr(requestJSON)
	defer freeC(r)
	var out *C.char
	if err := takeError(C.godek_exec(C.uintptr_t(s), r, C.uintptr_t(cancel), &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

// cFileCall runs one of the file entry points through its C wrapper.
func cFileCall(fn func(C.uintptr_t, *C.char, C.uintptr_t, **C.char) *C.odek_error_t, s uintptr, requestJSON string, cancel uintptr) (string, error) {
	r := cstr(requestJSON)
	defer freeC(r)
	var out *C.char
	if err := takeError(fn(C.uintptr_t(s), r, C.uintptr_t(cancel), &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

func cReadFile(s uintptr, requestJSON string, cancel uintptr) (string, error) {
	return cFileCall(func(a C.uintptr_t, b *C.char, c C.uintptr_t, d **C.char) *C.odek_error_t {
		return C.godek_read_file(a, b, c, d)
	}, s, requestJSON, cancel)
}

func cWriteFile(s uintptr, requestJSON string, cancel uintptr) (string, error) {
	return cFileCall(func(a C.uintptr_t, b *C.char, c C.uintptr_t, d **C.char) *C.odek_error_t {
		return C.godek_write_file(a, b, c, d)
	}, s, requestJSON, cancel)
}

func cEditFile(s uintptr, requestJSON string, cancel uintptr) (string, error) {
	return cFileCall(func(a C.uintptr_t, b *C.char, c C.uintptr_t, d **C.char) *C.odek_error_t {
		return C.godek_edit_file(a, b, c, d)
	}, s, requestJSON, cancel)
}

func cListDirectory(s uintptr, requestJSON string, cancel uintptr) (string, error) {
	return cFileCall(func(a C.uintptr_t, b *C.char, c C.uintptr_t, d **C.char) *C.odek_error_t {
		return C.godek_list_directory(a, b, c, d)
	}, s, requestJSON, cancel)
}

// cExecStream runs odek_exec_stream; user is a cgo.Handle of the
// *ExecStream that godekStreamOutput hands the chunks to.
func cExecStream(s uintptr, requestJSON string, cancel uintptr, user uintptr) (string, error) {
	r := cstr(requestJSON)
	defer freeC(r)
	var out *C.char
	if err := takeError(C.godek_exec_stream(C.uintptr_t(s), r, C.uintptr_t(cancel), C.uintptr_t(user), &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

// cExecStreamStdin runs odek_exec_stream_stdin with the stdin handle p.
func cExecStreamStdin(s uintptr, requestJSON string, cancel uintptr, p uintptr, user uintptr) (string, error) {
	r := cstr(requestJSON)
	defer freeC(r)
	var out *C.char
	if err := takeError(C.godek_exec_stream_stdin(C.uintptr_t(s), r, C.uintptr_t(cancel), C.uintptr_t(p), C.uintptr_t(user), &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

// cStdinNew makes a stdin handle (odek_stdin_new); 0 when none could be made.
func cStdinNew() uintptr { return uintptr(C.godek_stdin_new()) }

// cStdinWrite queues b for the command's stdin (odek_stdin_write; b is
// copied by the library).
func cStdinWrite(p uintptr, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return takeError(C.godek_stdin_write(C.uintptr_t(p), (*C.uint8_t)(unsafe.Pointer(&b[0])), C.size_t(len(b))))
}

// cStdinClose closes the command's stdin after what was written.
func cStdinClose(p uintptr) error { return takeError(C.godek_stdin_close(C.uintptr_t(p))) }

// cStdinFree frees the handle (odek_stdin_free).
func cStdinFree(p uintptr) error { return takeError(C.godek_stdin_free(C.uintptr_t(p))) }

func cSandboxDestroy(s uintptr) error {
	return takeError(C.godek_sandbox_destroy(C.uintptr_t(s)))
}

// cSandboxClose is odek_sandbox_close: the "odek.close-result/1" document.
func cSandboxClose(s uintptr) (string, error) {
	var out *C.char
	if err := takeError(C.godek_sandbox_close(C.uintptr_t(s), &out)); err != nil {
		return "", err
	}
	return takeString(out), nil
}

// cCodes is the code table as the C compiler sees the header, for the test
// that compares it with the Go constants and with the header's text.
func cCodes() map[string]int {
	return map[string]int{
		"ODEK_E_NULL_POINTER":              C.ODEK_E_NULL_POINTER,
		"ODEK_E_INVALID_UTF8":              C.ODEK_E_INVALID_UTF8,
		"ODEK_E_INVALID_JSON":              C.ODEK_E_INVALID_JSON,
		"ODEK_E_INVALID_HANDLE":            C.ODEK_E_INVALID_HANDLE,
		"ODEK_E_INVALID_ARGUMENT":          C.ODEK_E_INVALID_ARGUMENT,
		"ODEK_E_PANIC":                     C.ODEK_E_PANIC,
		"ODEK_E_INTERNAL":                  C.ODEK_E_INTERNAL,
		"ODEK_E_FORKED":                    C.ODEK_E_FORKED,
		"ODEK_E_REENTRANT":                 C.ODEK_E_REENTRANT,
		"ODEK_E_CONFIG":                    C.ODEK_E_CONFIG,
		"ODEK_E_CONFIG_MALFORMED":          C.ODEK_E_CONFIG_MALFORMED,
		"ODEK_E_NETWORK_MODE":              C.ODEK_E_NETWORK_MODE,
		"ODEK_E_NETWORK_NAME":              C.ODEK_E_NETWORK_NAME,
		"ODEK_E_NETWORK_NOT_FOUND":         C.ODEK_E_NETWORK_NOT_FOUND,
		"ODEK_E_NETWORK_ID_PREFIX":         C.ODEK_E_NETWORK_ID_PREFIX,
		"ODEK_E_NETWORK_AMBIGUOUS":         C.ODEK_E_NETWORK_AMBIGUOUS,
		"ODEK_E_NETWORK_UNSUPPORTED":       C.ODEK_E_NETWORK_UNSUPPORTED,
		"ODEK_E_NETWORK_TOO_MANY":          C.ODEK_E_NETWORK_TOO_MANY,
		"ODEK_E_COMPOSE_NOT_RUNNING":       C.ODEK_E_COMPOSE_NOT_RUNNING,
		"ODEK_E_COMPOSE_NAME":              C.ODEK_E_COMPOSE_NAME,
		"ODEK_E_IMAGE_REFERENCE":           C.ODEK_E_IMAGE_REFERENCE,
		"ODEK_E_IMAGE_BUILD":               C.ODEK_E_IMAGE_BUILD,
		"ODEK_E_IMAGE_DIGEST":              C.ODEK_E_IMAGE_DIGEST,
		"ODEK_E_VOLUME":                    C.ODEK_E_VOLUME,
		"ODEK_E_ENDPOINT":                  C.ODEK_E_ENDPOINT,
		"ODEK_E_NARROW":                    C.ODEK_E_NARROW,
		"ODEK_E_FILE":                      C.ODEK_E_FILE,
		"ODEK_E_APPROVAL_REQUIRED":         C.ODEK_E_APPROVAL_REQUIRED,
		"ODEK_E_APPROVAL_MISMATCH":         C.ODEK_E_APPROVAL_MISMATCH,
		"ODEK_E_APPROVAL_NETWORKS_CHANGED": C.ODEK_E_APPROVAL_NETWORKS_CHANGED,
		"ODEK_E_APPROVAL_STORE":            C.ODEK_E_APPROVAL_STORE,
		"ODEK_E_APPROVAL_DENIED":           C.ODEK_E_APPROVAL_DENIED,
		"ODEK_E_DOCKER_REJECTED":           C.ODEK_E_DOCKER_REJECTED,
		"ODEK_E_DOCKER_VERIFY":             C.ODEK_E_DOCKER_VERIFY,
		"ODEK_E_EXEC":                      C.ODEK_E_EXEC,
		"ODEK_E_SANDBOX_STOPPED":           C.ODEK_E_SANDBOX_STOPPED,
		"ODEK_E_IMAGE_UNAVAILABLE":         C.ODEK_E_IMAGE_UNAVAILABLE,
		"ODEK_E_DAEMON_UNREACHABLE":        C.ODEK_E_DAEMON_UNREACHABLE,
		"ODEK_E_DAEMON_TIMEOUT":            C.ODEK_E_DAEMON_TIMEOUT,
		"ODEK_E_CANCELLED":                 C.ODEK_E_CANCELLED,
	}
}

// cHeaderABIVersion is ODEK_ABI_VERSION as compiled from the header.
const cHeaderABIVersion = C.ODEK_ABI_VERSION

// cExecOutputLimit is ODEK_EXEC_OUTPUT_LIMIT as compiled from the header.
const cExecOutputLimit = C.ODEK_EXEC_OUTPUT_LIMIT

// cFileReadLimit and cFileWriteLimit are ODEK_FILE_READ_LIMIT and
// ODEK_FILE_WRITE_LIMIT as compiled from the header.
const (
	cFileReadLimit  = C.ODEK_FILE_READ_LIMIT
	cFileWriteLimit = C.ODEK_FILE_WRITE_LIMIT
)

// cStreamStdout and cStreamStderr are ODEK_STREAM_STDOUT and
// ODEK_STREAM_STDERR as compiled from the header.
const (
	cStreamStdout = C.ODEK_STREAM_STDOUT
	cStreamStderr = C.ODEK_STREAM_STDERR
)
