package odek

import (
	"errors"
	"fmt"
)

// Error is a failure reported by libodek (SPEC §10.1): a stable numeric code
// (one of the Code* constants), the failure class of SPEC §6.3 and a message
// naming the cause and the fix.
//
// Match it with errors.Is against the sentinels (ErrConfig, ErrApproval,
// ErrDockerRejected, ErrImageUnavailable, ErrDaemonUnreachable, ErrUsage,
// ErrInvalidHandle, ErrNarrow, ErrFile), or against an *Error with the same Code;
// get at the code with errors.As:
//
//	var oe *odek.Error
//	if errors.As(err, &oe) && oe.Code == odek.CodeComposeNotRunning { … }
type Error struct {
	// Code is the stable numeric code (Code* constants, ODEK_E_* in odek.h).
	Code int
	// Class is the failure class: ClassConfig, ClassDockerRejected,
	// ClassImageUnavailable, ClassDaemonUnreachable or ClassUsage.
	Class string
	// Message is one paragraph naming the cause and the fix.
	Message string
}

// Error implements error: "odek: <message> (<class>, code <n>)".
func (e *Error) Error() string {
	return fmt.Sprintf("odek: %s (%s, code %d)", e.Message, e.Class, e.Code)
}

// Is reports whether target is a sentinel whose class or code matches e, or
// an *Error with the same Code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case *kind:
		return t.match(e)
	case *Error:
		return t != nil && t.Code == e.Code
	}
	return false
}

// Failure classes (SPEC §6.3), as carried in Error.Class.
const (
	// ClassConfig: misconfiguration or a missing approval; fatal in every mode.
	ClassConfig = "config"
	// ClassDockerRejected: the daemon answered but refused; fatal.
	ClassDockerRejected = "docker-rejected"
	// ClassImageUnavailable: the image cannot be pulled.
	ClassImageUnavailable = "image-unavailable"
	// ClassDaemonUnreachable: no socket, connection refused, ping fails.
	ClassDaemonUnreachable = "daemon-unreachable"
	// ClassUsage: misuse of the ABI (bad argument, closed handle) or a bug.
	ClassUsage = "usage"
	// ClassCancelled: the caller cancelled the call (its context ended).
	ClassCancelled = "cancelled"
)

// Stable error codes, mirroring the ODEK_E_* values of enum odek_code_t in ffi/include/odek.h
// (a test checks them against both the header's text and what cgo compiles
// from it). Grouped by area: 1xx usage, 2xx config, 3xx approval (class
// config), 4xx docker-rejected, 5xx image-unavailable, 6xx daemon-unreachable.
const (
	CodeNullPointer             = 100 // a NULL pointer argument
	CodeInvalidUTF8             = 101 // a string argument is not valid UTF-8
	CodeInvalidJSON             = 102 // a JSON argument does not parse
	CodeInvalidHandle           = 103 // a handle is unknown or was already closed
	CodeInvalidArgument         = 104 // a JSON argument has the wrong shape or values
	CodePanic                   = 105 // a panic was caught at the boundary (a bug in odek)
	CodeInternal                = 106 // any other internal failure
	CodeForked                  = 107 // called in a process forked from libodek's user (see doc.go)
	CodeReentrant               = 108 // a blocking call from inside a streaming exec's output callback
	CodeConfig                  = 200 // configuration: generic
	CodeConfigMalformed         = 201 // a config file is malformed
	CodeNetworkMode             = 202 // sandbox_network is not none/bridge
	CodeNetworkName             = 203 // a network name is invalid or reserved
	CodeNetworkNotFound         = 204 // a network was not found
	CodeNetworkIDPrefix         = 205 // a network name matched by ID prefix (refused)
	CodeNetworkAmbiguous        = 206 // several networks carry the name
	CodeNetworkUnsupported      = 207 // a network's driver or scope is not local bridge
	CodeNetworkTooMany          = 208 // more than 8 networks
	CodeComposeNotRunning       = 209 // the Compose project is not running
	CodeComposeName             = 210 // the Compose project name is invalid
	CodeImageReference          = 211 // the image reference is invalid
	CodeImageBuild              = 212 // Dockerfile.odek failed to build
	CodeImageDigest             = 213 // the image does not carry the pinned digest
	CodeVolume                  = 214 // a volume entry is refused
	CodeEndpoint                = 215 // the Docker endpoint is invalid
	CodeNarrow                  = 216 // a sub-agent request would widen its parent's sandbox
	CodeFile                    = 217 // a file operation in the sandbox was refused (nothing written)
	CodeApprovalRequired        = 300 // the plan needs an approval that was not given
	CodeApprovalMismatch        = 301 // the approval does not match the plan
	CodeApprovalNetworksChanged = 302 // the project's networks changed since approval
	CodeApprovalStore           = 303 // the approval store cannot be read or written
	CodeApprovalDenied          = 304 // the operator denied the approval
	CodeDockerRejected          = 400 // Docker refused create/start/connect
	CodeDockerVerify            = 401 // the container did not verify against the plan
	CodeExec                    = 402 // a command could not run or be waited for
	CodeSandboxStopped          = 403 // the sandbox stopped while a command ran
	CodeImageUnavailable        = 500 // the image cannot be pulled
	CodeDaemonUnreachable       = 600 // the daemon is unreachable
	CodeDaemonTimeout           = 601 // the daemon did not answer in time
	CodeCancelled               = 700 // the caller cancelled the call (context)
)

// codeNames maps each Code* constant to its ODEK_E_* name in the header.
var codeNames = map[int]string{
	CodeNullPointer:             "ODEK_E_NULL_POINTER",
	CodeInvalidUTF8:             "ODEK_E_INVALID_UTF8",
	CodeInvalidJSON:             "ODEK_E_INVALID_JSON",
	CodeInvalidHandle:           "ODEK_E_INVALID_HANDLE",
	CodeInvalidArgument:         "ODEK_E_INVALID_ARGUMENT",
	CodePanic:                   "ODEK_E_PANIC",
	CodeInternal:                "ODEK_E_INTERNAL",
	CodeForked:                  "ODEK_E_FORKED",
	CodeReentrant:               "ODEK_E_REENTRANT",
	CodeConfig:                  "ODEK_E_CONFIG",
	CodeConfigMalformed:         "ODEK_E_CONFIG_MALFORMED",
	CodeNetworkMode:             "ODEK_E_NETWORK_MODE",
	CodeNetworkName:             "ODEK_E_NETWORK_NAME",
	CodeNetworkNotFound:         "ODEK_E_NETWORK_NOT_FOUND",
	CodeNetworkIDPrefix:         "ODEK_E_NETWORK_ID_PREFIX",
	CodeNetworkAmbiguous:        "ODEK_E_NETWORK_AMBIGUOUS",
	CodeNetworkUnsupported:      "ODEK_E_NETWORK_UNSUPPORTED",
	CodeNetworkTooMany:          "ODEK_E_NETWORK_TOO_MANY",
	CodeComposeNotRunning:       "ODEK_E_COMPOSE_NOT_RUNNING",
	CodeComposeName:             "ODEK_E_COMPOSE_NAME",
	CodeImageReference:          "ODEK_E_IMAGE_REFERENCE",
	CodeImageBuild:              "ODEK_E_IMAGE_BUILD",
	CodeImageDigest:             "ODEK_E_IMAGE_DIGEST",
	CodeVolume:                  "ODEK_E_VOLUME",
	CodeEndpoint:                "ODEK_E_ENDPOINT",
	CodeNarrow:                  "ODEK_E_NARROW",
	CodeFile:                    "ODEK_E_FILE",
	CodeApprovalRequired:        "ODEK_E_APPROVAL_REQUIRED",
	CodeApprovalMismatch:        "ODEK_E_APPROVAL_MISMATCH",
	CodeApprovalNetworksChanged: "ODEK_E_APPROVAL_NETWORKS_CHANGED",
	CodeApprovalStore:           "ODEK_E_APPROVAL_STORE",
	CodeApprovalDenied:          "ODEK_E_APPROVAL_DENIED",
	CodeDockerRejected:          "ODEK_E_DOCKER_REJECTED",
	CodeDockerVerify:            "ODEK_E_DOCKER_VERIFY",
	CodeExec:                    "ODEK_E_EXEC",
	CodeSandboxStopped:          "ODEK_E_SANDBOX_STOPPED",
	CodeImageUnavailable:        "ODEK_E_IMAGE_UNAVAILABLE",
	CodeDaemonUnreachable:       "ODEK_E_DAEMON_UNREACHABLE",
	CodeDaemonTimeout:           "ODEK_E_DAEMON_TIMEOUT",
	CodeCancelled:               "ODEK_E_CANCELLED",
}

// CodeName is the ODEK_E_* name of a code ("" when unknown).
func CodeName(code int) string { return codeNames[code] }

// kind is a sentinel error matched by class or code range.
type kind struct {
	name  string
	match func(*Error) bool
}

func (k *kind) Error() string { return "odek: " + k.name }

func byClass(class string) func(*Error) bool {
	return func(e *Error) bool { return e.Class == class }
}

// Sentinels for errors.Is. Each matches every *Error of its class or codes.
var (
	// ErrConfig matches class "config": misconfiguration, including the
	// approval failures (3xx), which SPEC §6.3 files under config.
	ErrConfig error = &kind{"config error", byClass(ClassConfig)}
	// ErrApproval matches the approval codes (3xx): approval required,
	// mismatched, networks changed, store failure, denied.
	ErrApproval error = &kind{"approval error", func(e *Error) bool { return e.Code/100 == 3 }}
	// ErrNarrow matches CodeNarrow: a sub-agent request would widen.
	ErrNarrow error = &kind{"narrowing refused", func(e *Error) bool { return e.Code == CodeNarrow }}
	// ErrFile matches CodeFile: a file operation in the sandbox was
	// refused (absent, not permitted, read-only, too large, not UTF-8, an
	// edit that does not apply, no supervisor); nothing was written.
	ErrFile error = &kind{"file operation refused", func(e *Error) bool { return e.Code == CodeFile }}
	// ErrDockerRejected matches class "docker-rejected" (4xx).
	ErrDockerRejected error = &kind{"docker rejected", byClass(ClassDockerRejected)}
	// ErrImageUnavailable matches class "image-unavailable" (5xx).
	ErrImageUnavailable error = &kind{"image unavailable", byClass(ClassImageUnavailable)}
	// ErrDaemonUnreachable matches class "daemon-unreachable" (6xx),
	// including CodeDaemonTimeout.
	ErrDaemonUnreachable error = &kind{"daemon unreachable", byClass(ClassDaemonUnreachable)}
	// ErrUsage matches class "usage" (1xx): misuse of the API or a bug.
	ErrUsage error = &kind{"usage error", byClass(ClassUsage)}
	// ErrInvalidHandle matches CodeInvalidHandle: a closed client or sandbox.
	ErrInvalidHandle error = &kind{"invalid handle", func(e *Error) bool { return e.Code == CodeInvalidHandle }}
)

// ErrABIVersion is wrapped by the error returned when the loaded libodek
// implements another ABI version than this binding was written for.
var ErrABIVersion = errors.New("odek: libodek ABI version mismatch")

// closedError is what a call on a closed Client or Sandbox returns: the same
// code and class libodek uses for a destroyed handle.
func closedError(what string) error {
	return &Error{
		Code:    CodeInvalidHandle,
		Class:   ClassUsage,
		Message: "the " + what + " was already closed",
	}
}

// usageError is a binding-side argument error (CodeInvalidArgument).
func usageError(format string, args ...interface{}) error {
	return &Error{Code: CodeInvalidArgument, Class: ClassUsage, Message: fmt.Sprintf(format, args...)}
}
