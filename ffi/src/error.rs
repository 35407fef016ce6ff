//! Error objects and their stable numeric codes (SPEC §10.1).
//!
//! Codes never change meaning. They are grouped by area; the hundreds digit
//! is the area and the failure class of SPEC §6.3 follows from it.

use std::ffi::{c_char, CString};

use odek_core::approval::ApprovalError;
use odek_core::config::ConfigError;
use odek_core::engine::{EndpointError, EngineErrorKind};
use odek_core::image::ImageError;
use odek_core::network::NetworkError;
use odek_core::{Error, FailureClass};

/// Misuse of the ABI (class `usage`). A NULL pointer argument.
pub const ODEK_E_NULL_POINTER: i32 = 100;
/// A string argument is not valid UTF-8.
pub const ODEK_E_INVALID_UTF8: i32 = 101;
/// A JSON argument does not parse.
pub const ODEK_E_INVALID_JSON: i32 = 102;
/// A handle is unknown or was already destroyed / freed.
pub const ODEK_E_INVALID_HANDLE: i32 = 103;
/// A JSON argument parses but has the wrong shape or values.
pub const ODEK_E_INVALID_ARGUMENT: i32 = 104;
/// A panic was caught at the boundary (a bug in odek; the process lives on).
pub const ODEK_E_PANIC: i32 = 105;
/// Any other internal failure.
pub const ODEK_E_INTERNAL: i32 = 106;

/// Configuration (class `config`): generic.
pub const ODEK_E_CONFIG: i32 = 200;
/// A config file is malformed (file, line, column in the message).
pub const ODEK_E_CONFIG_MALFORMED: i32 = 201;
/// `sandbox_network` is not `none`/`bridge`.
pub const ODEK_E_NETWORK_MODE: i32 = 202;
/// A network name is invalid or reserved.
pub const ODEK_E_NETWORK_NAME: i32 = 203;
/// A network was not found.
pub const ODEK_E_NETWORK_NOT_FOUND: i32 = 204;
/// A network name matched by ID prefix (refused).
pub const ODEK_E_NETWORK_ID_PREFIX: i32 = 205;
/// Several networks carry the name.
pub const ODEK_E_NETWORK_AMBIGUOUS: i32 = 206;
/// A network's driver or scope is not local bridge.
pub const ODEK_E_NETWORK_UNSUPPORTED: i32 = 207;
/// More than 8 networks.
pub const ODEK_E_NETWORK_TOO_MANY: i32 = 208;
/// The Compose project is not running.
pub const ODEK_E_COMPOSE_NOT_RUNNING: i32 = 209;
/// The Compose project name is invalid.
pub const ODEK_E_COMPOSE_NAME: i32 = 210;
/// The image reference is invalid.
pub const ODEK_E_IMAGE_REFERENCE: i32 = 211;
/// `Dockerfile.odek` failed to build, or is not a readable regular file.
pub const ODEK_E_IMAGE_BUILD: i32 = 212;
/// The image does not carry the pinned digest.
pub const ODEK_E_IMAGE_DIGEST: i32 = 213;
/// A volume entry is refused.
pub const ODEK_E_VOLUME: i32 = 214;
/// The Docker endpoint (`DOCKER_HOST`, context) is invalid.
pub const ODEK_E_ENDPOINT: i32 = 215;
/// A sub-agent request would widen its parent's sandbox.
pub const ODEK_E_NARROW: i32 = 216;

/// Approval (class `config`): the plan needs an approval that was not given.
pub const ODEK_E_APPROVAL_REQUIRED: i32 = 300;
/// The approval does not match the plan.
pub const ODEK_E_APPROVAL_MISMATCH: i32 = 301;
/// The project's networks changed since approval (SPEC §7.4).
pub const ODEK_E_APPROVAL_NETWORKS_CHANGED: i32 = 302;
/// The approval store cannot be read or written.
pub const ODEK_E_APPROVAL_STORE: i32 = 303;
/// The operator denied the approval.
pub const ODEK_E_APPROVAL_DENIED: i32 = 304;

/// Docker refused (class `docker-rejected`): create/start/connect failed.
pub const ODEK_E_DOCKER_REJECTED: i32 = 400;
/// The container did not verify against the plan.
pub const ODEK_E_DOCKER_VERIFY: i32 = 401;
/// A command could not run or be waited for in the sandbox.
pub const ODEK_E_EXEC: i32 = 402;
/// The sandbox stopped (killed, out of memory) while a command ran in it;
/// the command may have partly run.
pub const ODEK_E_SANDBOX_STOPPED: i32 = 403;

/// The image cannot be pulled (class `image-unavailable`).
pub const ODEK_E_IMAGE_UNAVAILABLE: i32 = 500;

/// The daemon is unreachable (class `daemon-unreachable`).
pub const ODEK_E_DAEMON_UNREACHABLE: i32 = 600;
/// The daemon did not answer in time.
pub const ODEK_E_DAEMON_TIMEOUT: i32 = 601;

/// The codes, for [`Failure`]'s constructor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Code {
    /// [`ODEK_E_NULL_POINTER`].
    NullPointer,
    /// [`ODEK_E_INVALID_UTF8`].
    InvalidUtf8,
    /// [`ODEK_E_INVALID_JSON`].
    InvalidJson,
    /// [`ODEK_E_INVALID_HANDLE`].
    InvalidHandle,
    /// [`ODEK_E_INVALID_ARGUMENT`].
    InvalidArgument,
    /// [`ODEK_E_PANIC`].
    Panic,
    /// [`ODEK_E_INTERNAL`].
    Internal,
}

impl Code {
    fn value(self) -> i32 {
        match self {
            Code::NullPointer => ODEK_E_NULL_POINTER,
            Code::InvalidUtf8 => ODEK_E_INVALID_UTF8,
            Code::InvalidJson => ODEK_E_INVALID_JSON,
            Code::InvalidHandle => ODEK_E_INVALID_HANDLE,
            Code::InvalidArgument => ODEK_E_INVALID_ARGUMENT,
            Code::Panic => ODEK_E_PANIC,
            Code::Internal => ODEK_E_INTERNAL,
        }
    }
}

/// The failure class name for a code (SPEC §6.3, plus `usage` for ABI misuse).
pub fn class_of(code: i32) -> &'static str {
    match code / 100 {
        1 => "usage",
        2 | 3 => FailureClass::Config.as_str(),
        4 => FailureClass::DockerRejected.as_str(),
        5 => FailureClass::ImageUnavailable.as_str(),
        6 => FailureClass::DaemonUnreachable.as_str(),
        _ => "usage",
    }
}

/// The stable code of a core error.
pub fn code_of(e: &Error) -> i32 {
    match e {
        Error::Config(c) => match c {
            ConfigError::Malformed { .. } | ConfigError::Unreadable { .. } => {
                ODEK_E_CONFIG_MALFORMED
            }
            ConfigError::InvalidNetworkMode { .. } => ODEK_E_NETWORK_MODE,
            ConfigError::InvalidNetworkName { .. } => ODEK_E_NETWORK_NAME,
            ConfigError::InvalidComposeProject { .. } => ODEK_E_COMPOSE_NAME,
            ConfigError::InvalidVolume { .. } => ODEK_E_VOLUME,
            ConfigError::InvalidValue { key, .. } if key == "sandbox_image" => {
                ODEK_E_IMAGE_REFERENCE
            }
            _ => ODEK_E_CONFIG,
        },
        Error::Network(n) => match n {
            NetworkError::IdPrefix { .. } => ODEK_E_NETWORK_ID_PREFIX,
            NetworkError::NotFound { .. } => ODEK_E_NETWORK_NOT_FOUND,
            NetworkError::Ambiguous { .. } => ODEK_E_NETWORK_AMBIGUOUS,
            NetworkError::Unsupported { .. } => ODEK_E_NETWORK_UNSUPPORTED,
            NetworkError::ComposeNotRunning { .. } => ODEK_E_COMPOSE_NOT_RUNNING,
            NetworkError::TooMany { .. } => ODEK_E_NETWORK_TOO_MANY,
            NetworkError::Engine(en) => engine_code(en.kind),
        },
        Error::Image(i) => match i {
            ImageError::InvalidReference(_) => ODEK_E_IMAGE_REFERENCE,
            ImageError::PullFailed { .. } => ODEK_E_IMAGE_UNAVAILABLE,
            ImageError::DigestMismatch { .. } => ODEK_E_IMAGE_DIGEST,
            ImageError::BuildFailed { .. }
            | ImageError::DockerfileUnusable { .. }
            | ImageError::DockerfileChanged { .. } => ODEK_E_IMAGE_BUILD,
            ImageError::Engine(en) => engine_code(en.kind),
        },
        Error::Approval(a) => match a {
            ApprovalError::Required { .. } | ApprovalError::NonInteractive { .. } => {
                ODEK_E_APPROVAL_REQUIRED
            }
            ApprovalError::Denied { .. } => ODEK_E_APPROVAL_DENIED,
            ApprovalError::KeyMismatch { .. } | ApprovalError::NotNeeded => {
                ODEK_E_APPROVAL_MISMATCH
            }
            ApprovalError::NetworksChanged { .. } => ODEK_E_APPROVAL_NETWORKS_CHANGED,
            ApprovalError::Store { .. } => ODEK_E_APPROVAL_STORE,
        },
        Error::Narrow(_) => ODEK_E_NARROW,
        Error::Endpoint(EndpointError::NoSocket { .. }) => ODEK_E_DAEMON_UNREACHABLE,
        Error::Endpoint(_) => ODEK_E_ENDPOINT,
        Error::Unreachable { message, .. } if message.contains("no answer within") => {
            ODEK_E_DAEMON_TIMEOUT
        }
        Error::Unreachable { .. } => ODEK_E_DAEMON_UNREACHABLE,
        Error::Rejected { step, .. } if *step == odek_core::Step::Verify => ODEK_E_DOCKER_VERIFY,
        Error::Rejected { .. } => ODEK_E_DOCKER_REJECTED,
        Error::Exec { class, .. } => match class {
            FailureClass::DaemonUnreachable => ODEK_E_DAEMON_UNREACHABLE,
            FailureClass::Config => ODEK_E_CONFIG,
            _ => ODEK_E_EXEC,
        },
        Error::SandboxStopped { .. } => ODEK_E_SANDBOX_STOPPED,
        Error::Usage(_) => ODEK_E_INVALID_ARGUMENT,
    }
}

fn engine_code(kind: EngineErrorKind) -> i32 {
    match kind {
        EngineErrorKind::Unreachable => ODEK_E_DAEMON_UNREACHABLE,
        EngineErrorKind::Timeout => ODEK_E_DAEMON_TIMEOUT,
        _ => ODEK_E_DOCKER_REJECTED,
    }
}

/// An error object (`odek_error_t*`): code, class and message. Opaque to C.
#[allow(non_camel_case_types)]
pub struct odek_error_t {
    code: i32,
    class: &'static CStrStatic,
    message: CString,
}

/// A static NUL-terminated class name.
pub(crate) struct CStrStatic(&'static [u8]);

fn class_cstr(code: i32) -> &'static CStrStatic {
    static USAGE: CStrStatic = CStrStatic(b"usage\0");
    static CONFIG: CStrStatic = CStrStatic(b"config\0");
    static REJECTED: CStrStatic = CStrStatic(b"docker-rejected\0");
    static IMAGE: CStrStatic = CStrStatic(b"image-unavailable\0");
    static DAEMON: CStrStatic = CStrStatic(b"daemon-unreachable\0");
    match class_of(code) {
        "config" => &CONFIG,
        "docker-rejected" => &REJECTED,
        "image-unavailable" => &IMAGE,
        "daemon-unreachable" => &DAEMON,
        _ => &USAGE,
    }
}

/// A failure on its way out through the boundary.
#[derive(Debug)]
pub(crate) struct Failure {
    code: i32,
    message: String,
}

impl Failure {
    /// A failure with a code and message.
    pub fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code: code.value(),
            message: message.into(),
        }
    }

    /// Allocates the error object handed to C.
    pub fn into_raw(self) -> *mut odek_error_t {
        let msg = self.message.replace('\0', "\u{fffd}");
        Box::into_raw(Box::new(odek_error_t {
            code: self.code,
            class: class_cstr(self.code),
            message: CString::new(msg).expect("NUL bytes were replaced"),
        }))
    }
}

impl From<Error> for Failure {
    /// The message's advice is worded for a library caller (the `workdir`
    /// argument, settings keys, closing the sandbox), as every libodek
    /// client's surface is (`odek_client_new`); the calls that take no
    /// client (narrow) reach the same callers.
    fn from(e: Error) -> Failure {
        Failure {
            code: code_of(&e),
            message: odek_core::advice::Surface::Library
                .render(&e.to_string())
                .into_owned(),
        }
    }
}

/// The stable numeric code of an error; 0 when `error` is NULL.
///
/// # Safety
/// `error` is NULL or an error object returned by odek and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn odek_error_code(error: *const odek_error_t) -> i32 {
    // SAFETY: per the contract, NULL or a live error object.
    unsafe { error.as_ref() }.map_or(0, |e| e.code)
}

/// The failure class: `"config"`, `"docker-rejected"`, `"image-unavailable"`,
/// `"daemon-unreachable"` (SPEC §6.3) or `"usage"` (ABI misuse). A static
/// string: do not free. `""` when `error` is NULL.
///
/// # Safety
/// `error` is NULL or a live error object.
#[no_mangle]
pub unsafe extern "C" fn odek_error_class(error: *const odek_error_t) -> *const c_char {
    // SAFETY: per the contract.
    match unsafe { error.as_ref() } {
        Some(e) => e.class.0.as_ptr().cast(),
        None => c"".as_ptr(),
    }
}

/// The message: one paragraph naming the cause and the fix. Owned by the
/// error object (valid until `odek_error_free`); `""` when `error` is NULL.
///
/// # Safety
/// `error` is NULL or a live error object.
#[no_mangle]
pub unsafe extern "C" fn odek_error_message(error: *const odek_error_t) -> *const c_char {
    // SAFETY: per the contract.
    match unsafe { error.as_ref() } {
        Some(e) => e.message.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// Frees an error object. NULL is a no-op.
///
/// # Safety
/// `error` is NULL or a live error object, freed at most once.
#[no_mangle]
pub unsafe extern "C" fn odek_error_free(error: *mut odek_error_t) {
    if !error.is_null() {
        // SAFETY: allocated by `Failure::into_raw` (Box) and not yet freed.
        drop(unsafe { Box::from_raw(error) });
    }
}
