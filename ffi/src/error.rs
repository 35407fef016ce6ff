//! Error objects and their stable numeric codes (SPEC §10.1).
//!
//! Codes never change meaning. They are grouped by area (the hundreds
//! digit). The class of an error the core made is the core's
//! ([`odek_core::Error::reported_class`], as the CLI and MCP show it); an
//! error of the ABI itself (1xx: NULL pointers, bad JSON, handles) is
//! `usage`.

use std::ffi::{c_char, CStr, CString};

use odek_core::approval::ApprovalError;
use odek_core::config::ConfigError;
use odek_core::engine::{EndpointError, EngineErrorKind};
use odek_core::image::ImageError;
use odek_core::network::NetworkError;
use odek_core::{Error, ErrorClass, FailureClass};

/// The stable numeric codes of error objects (`odek_error_code`), one
/// `int32_t` each. Grouped by area, the hundreds digit: 1xx usage, 2xx and
/// 3xx config, 4xx docker-rejected, 5xx image-unavailable, 6xx
/// daemon-unreachable, 7xx cancelled; the class `odek_error_class` reports
/// is the core's for the error, which is the area's. Values never change
/// meaning; new codes are only added.
#[repr(i32)]
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum odek_code_t {
    /// Misuse of the ABI (class `usage`). A NULL pointer argument.
    ODEK_E_NULL_POINTER = 100,
    /// A string argument is not valid UTF-8.
    ODEK_E_INVALID_UTF8 = 101,
    /// A JSON argument does not parse.
    ODEK_E_INVALID_JSON = 102,
    /// A handle is unknown or was already destroyed / freed.
    ODEK_E_INVALID_HANDLE = 103,
    /// A JSON argument parses but has the wrong shape or values.
    ODEK_E_INVALID_ARGUMENT = 104,
    /// A panic was caught at the boundary (a bug in odek; the process lives on).
    ODEK_E_PANIC = 105,
    /// Any other internal failure.
    ODEK_E_INTERNAL = 106,
    /// The call was made in a process forked (without exec) from the one
    /// that made libodek's state — its runtime and handles: such a child
    /// cannot use them, and nothing was done (the parent's sandboxes are
    /// left to the parent). Exec the child, or use libodek only in it.
    ODEK_E_FORKED = 107,
    /// A call that blocks (one that talks to Docker: resolve, launch,
    /// describe, exec, config view, destroy) was made from inside an
    /// `odek_exec_stream` output callback, on the thread that runs it.
    /// Nothing was done. Queue the work and make the call after
    /// `odek_exec_stream` returns, or from another thread.
    ODEK_E_REENTRANT = 108,
    /// Configuration (class `config`): generic.
    ODEK_E_CONFIG = 200,
    /// A config file is malformed (file, line, column in the message).
    ODEK_E_CONFIG_MALFORMED = 201,
    /// `sandbox_network` is not `none`/`bridge`.
    ODEK_E_NETWORK_MODE = 202,
    /// A network name is invalid or reserved.
    ODEK_E_NETWORK_NAME = 203,
    /// A network was not found.
    ODEK_E_NETWORK_NOT_FOUND = 204,
    /// A network name matched by ID prefix (refused).
    ODEK_E_NETWORK_ID_PREFIX = 205,
    /// Several networks carry the name.
    ODEK_E_NETWORK_AMBIGUOUS = 206,
    /// A network's driver or scope is not local bridge, or a Swarm stack's
    /// overlay is not attachable.
    ODEK_E_NETWORK_UNSUPPORTED = 207,
    /// More than 8 networks.
    ODEK_E_NETWORK_TOO_MANY = 208,
    /// The Compose project (or Swarm stack) is not running.
    ODEK_E_COMPOSE_NOT_RUNNING = 209,
    /// The Compose project name is invalid.
    ODEK_E_COMPOSE_NAME = 210,
    /// The image reference is invalid.
    ODEK_E_IMAGE_REFERENCE = 211,
    /// `Dockerfile.odek` failed to build, or is not a readable regular file.
    ODEK_E_IMAGE_BUILD = 212,
    /// The image does not carry the pinned digest.
    ODEK_E_IMAGE_DIGEST = 213,
    /// A volume entry is refused.
    ODEK_E_VOLUME = 214,
    /// The Docker endpoint (`DOCKER_HOST`, context) is invalid.
    ODEK_E_ENDPOINT = 215,
    /// A sub-agent request would widen its parent's sandbox.
    ODEK_E_NARROW = 216,
    /// A file operation in the sandbox (`odek_read_file`, `odek_write_file`,
    /// `odek_edit_file`, `odek_list_directory`) was refused: the path absent
    /// or of the wrong type, not permitted to the sandbox's command user, a
    /// read-only file system, over a size limit, not UTF-8 as text, an edit
    /// whose old text is absent or not unique, or no odek supervisor in the
    /// sandbox. Nothing was written; the message says why and what to do.
    ODEK_E_FILE = 217,
    /// Approval (class `config`): the plan needs an approval that was not given.
    ODEK_E_APPROVAL_REQUIRED = 300,
    /// The approval does not match the plan.
    ODEK_E_APPROVAL_MISMATCH = 301,
    /// The project's networks changed since approval (SPEC §7.4).
    ODEK_E_APPROVAL_NETWORKS_CHANGED = 302,
    /// The approval store cannot be read or written.
    ODEK_E_APPROVAL_STORE = 303,
    /// The operator denied the approval.
    ODEK_E_APPROVAL_DENIED = 304,
    /// Docker refused (class `docker-rejected`): create/start/connect failed.
    ODEK_E_DOCKER_REJECTED = 400,
    /// The container did not verify against the plan.
    ODEK_E_DOCKER_VERIFY = 401,
    /// A command could not run or be waited for in the sandbox.
    ODEK_E_EXEC = 402,
    /// The sandbox stopped (killed, out of memory) while a command ran in it;
    /// the command may have partly run.
    ODEK_E_SANDBOX_STOPPED = 403,
    /// The image cannot be pulled (class `image-unavailable`).
    ODEK_E_IMAGE_UNAVAILABLE = 500,
    /// The daemon is unreachable (class `daemon-unreachable`).
    ODEK_E_DAEMON_UNREACHABLE = 600,
    /// The daemon did not answer in time.
    ODEK_E_DAEMON_TIMEOUT = 601,

    /// The caller cancelled the call (class `cancelled`) through its
    /// `odek_cancel_t`: what the call had made is removed, a command it ran
    /// is killed.
    ODEK_E_CANCELLED = 700,
}

pub(crate) use odek_code_t as Code;

/// A class's name as a static C string (`odek_error_class`).
pub fn class_name(class: ErrorClass) -> &'static CStr {
    match class {
        ErrorClass::Usage => c"usage",
        ErrorClass::Cancelled => c"cancelled",
        ErrorClass::Failure(FailureClass::Config) => c"config",
        ErrorClass::Failure(FailureClass::DockerRejected) => c"docker-rejected",
        ErrorClass::Failure(FailureClass::ImageUnavailable) => c"image-unavailable",
        ErrorClass::Failure(FailureClass::DaemonUnreachable) => c"daemon-unreachable",
    }
}

/// The stable code of a core error.
pub fn code_of(e: &Error) -> odek_code_t {
    use odek_code_t::*;
    match e {
        Error::Config(c) => match c {
            ConfigError::Malformed { .. } | ConfigError::Unreadable { .. } => {
                ODEK_E_CONFIG_MALFORMED
            }
            ConfigError::InvalidNetworkMode { .. } => ODEK_E_NETWORK_MODE,
            ConfigError::InvalidNetworkName { .. } => ODEK_E_NETWORK_NAME,
            ConfigError::InvalidComposeProject { .. } => ODEK_E_COMPOSE_NAME,
            ConfigError::InvalidVolume { .. } => ODEK_E_VOLUME,
            ConfigError::InvalidImage { .. } => ODEK_E_IMAGE_REFERENCE,
            _ => ODEK_E_CONFIG,
        },
        Error::Network(n) => match n {
            NetworkError::IdPrefix { .. } => ODEK_E_NETWORK_ID_PREFIX,
            NetworkError::NotFound { .. } => ODEK_E_NETWORK_NOT_FOUND,
            NetworkError::Ambiguous { .. } => ODEK_E_NETWORK_AMBIGUOUS,
            // A stack's overlay that is not attachable is a network odek
            // does not attach, as a driver or scope it refuses (SPEC §4.1).
            NetworkError::Unsupported { .. } | NetworkError::NotAttachable { .. } => {
                ODEK_E_NETWORK_UNSUPPORTED
            }
            // A Swarm stack not running is reported as a Compose project
            // not running: the same fix, deploy it (SPEC §4.1).
            NetworkError::ComposeNotRunning { .. } | NetworkError::StackNotRunning { .. } => {
                ODEK_E_COMPOSE_NOT_RUNNING
            }
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
            ApprovalError::NetworksChanged { .. } | ApprovalError::Recreated { .. } => {
                ODEK_E_APPROVAL_NETWORKS_CHANGED
            }
            ApprovalError::Store { .. } => ODEK_E_APPROVAL_STORE,
        },
        Error::Narrow(_) => ODEK_E_NARROW,
        Error::Endpoint(EndpointError::NoSocket { .. }) => ODEK_E_DAEMON_UNREACHABLE,
        Error::Endpoint(_) => ODEK_E_ENDPOINT,
        Error::Unreachable { kind, .. } => match kind {
            EngineErrorKind::Timeout => ODEK_E_DAEMON_TIMEOUT,
            _ => ODEK_E_DAEMON_UNREACHABLE,
        },
        Error::Rejected { step, .. } if *step == odek_core::Step::Verify => ODEK_E_DOCKER_VERIFY,
        Error::Rejected { .. } => ODEK_E_DOCKER_REJECTED,
        Error::Exec { class, .. } => match class {
            FailureClass::DaemonUnreachable => ODEK_E_DAEMON_UNREACHABLE,
            FailureClass::Config => ODEK_E_CONFIG,
            _ => ODEK_E_EXEC,
        },
        Error::SandboxStopped { .. } => ODEK_E_SANDBOX_STOPPED,
        Error::NotFound(_)
        | Error::NotASandbox(_)
        | Error::InvalidPlan { .. }
        | Error::InvalidName { .. }
        | Error::Secret(_)
        | Error::Usage(_) => ODEK_E_INVALID_ARGUMENT,
        Error::File(_) => ODEK_E_FILE,
        Error::Cancelled { .. } => ODEK_E_CANCELLED,
    }
}

fn engine_code(kind: EngineErrorKind) -> odek_code_t {
    use odek_code_t::*;
    match kind {
        EngineErrorKind::Unreachable => ODEK_E_DAEMON_UNREACHABLE,
        EngineErrorKind::Timeout => ODEK_E_DAEMON_TIMEOUT,
        _ => ODEK_E_DOCKER_REJECTED,
    }
}

/// An error object (`odek_error_t*`): code, class and message. Opaque to C.
#[allow(non_camel_case_types)]
pub struct odek_error_t {
    code: odek_code_t,
    class: ErrorClass,
    message: CString,
}

/// A failure on its way out through the boundary.
#[derive(Debug)]
pub(crate) struct Failure {
    code: odek_code_t,
    class: ErrorClass,
    message: String,
}

impl Failure {
    /// A failure of the ABI itself (a NULL pointer, bad JSON, a handle, a
    /// panic): class `usage`, or `cancelled` for [`Code::ODEK_E_CANCELLED`].
    /// An error the core made goes through `From<Error>`, which takes the
    /// core's class.
    pub fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code,
            class: if code == Code::ODEK_E_CANCELLED {
                ErrorClass::Cancelled
            } else {
                ErrorClass::Usage
            },
            message: message.into(),
        }
    }

    /// The code (tests).
    #[cfg(test)]
    pub fn code(&self) -> Code {
        self.code
    }

    /// The class (tests).
    #[cfg(test)]
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// Allocates the error object handed to C.
    pub fn into_raw(self) -> *mut odek_error_t {
        let msg = self.message.replace('\0', "\u{fffd}");
        Box::into_raw(Box::new(odek_error_t {
            code: self.code,
            class: self.class,
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
            class: e.reported_class(),
            message: e.render(odek_core::advice::Surface::Library),
        }
    }
}

/// The stable numeric code of an error (an `odek_code_t` value); 0 when
/// `error` is NULL.
///
/// # Safety
/// `error` is NULL or an error object returned by odek and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn odek_error_code(error: *const odek_error_t) -> i32 {
    // SAFETY: per the contract, NULL or a live error object.
    unsafe { error.as_ref() }.map_or(0, |e| e.code as i32)
}

/// The failure class: `"config"`, `"docker-rejected"`, `"image-unavailable"`,
/// `"daemon-unreachable"` (SPEC §6.3), `"usage"` (ABI misuse) or
/// `"cancelled"` (the caller cancelled the call). A static
/// string: do not free. `""` when `error` is NULL.
///
/// # Safety
/// `error` is NULL or a live error object.
#[no_mangle]
pub unsafe extern "C" fn odek_error_class(error: *const odek_error_t) -> *const c_char {
    // SAFETY: per the contract.
    match unsafe { error.as_ref() } {
        Some(e) => class_name(e.class).as_ptr(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An error of the ABI itself is `usage` (a cancellation `cancelled`).
    #[test]
    fn abi_failures_are_usage() {
        use odek_code_t::*;
        for code in [
            ODEK_E_NULL_POINTER,
            ODEK_E_INVALID_ARGUMENT,
            ODEK_E_INTERNAL,
            ODEK_E_FORKED,
            ODEK_E_REENTRANT,
        ] {
            assert_eq!(Failure::new(code, "x").class(), ErrorClass::Usage);
        }
        assert_eq!(
            Failure::new(ODEK_E_CANCELLED, "x").class(),
            ErrorClass::Cancelled
        );
    }

    /// The area (hundreds digit) each class's codes lie in.
    fn area(class: ErrorClass) -> &'static [i32] {
        match class {
            ErrorClass::Usage => &[1],
            ErrorClass::Failure(FailureClass::Config) => &[2, 3],
            ErrorClass::Failure(FailureClass::DockerRejected) => &[4],
            ErrorClass::Failure(FailureClass::ImageUnavailable) => &[5],
            ErrorClass::Failure(FailureClass::DaemonUnreachable) => &[6],
            ErrorClass::Cancelled => &[7],
        }
    }

    /// An empty argv is the same class through the C ABI as through the CLI
    /// and MCP (both print `reported_class`): `usage`, with
    /// `ODEK_E_INVALID_ARGUMENT`; so is a request that does not parse.
    #[test]
    fn a_bad_exec_request_is_usage_as_on_every_surface() {
        let req = odek_core::ExecRequest {
            command: odek_core::Command::Argv(vec![]),
            env: vec![],
            timeout: None,
            workdir: None,
        };
        let e = req.check().expect_err("refused");
        let f = Failure::from(e.clone());
        assert_eq!(f.code(), Code::ODEK_E_INVALID_ARGUMENT);
        assert_eq!(f.class(), e.reported_class());
        assert_eq!(f.class(), ErrorClass::Usage);
        assert_eq!(class_name(f.class()).to_str(), Ok("usage"));
        let bad = odek_core::api::ExecRequest::default()
            .into_core()
            .expect_err("refused");
        let f = Failure::from(Error::from(bad));
        assert_eq!(
            (f.code(), f.class()),
            (Code::ODEK_E_INVALID_ARGUMENT, ErrorClass::Usage)
        );
    }

    /// The code of an error follows its variant and fields, never its text:
    /// each error is built with every one of several texts — among them the
    /// words a text match once looked for ("no answer within", the
    /// `sandbox_image` key) — and must keep the code this table gives it.
    /// Reintroducing a match on a message (or on a key) fails here.
    #[test]
    fn rewording_a_message_changes_no_code() {
        use odek_code_t::*;
        use odek_core::engine::{EngineError, Op};
        use odek_core::error::{NotASandbox, NotFound, Removal};
        use odek_core::secret::SecretError;
        use odek_core::Step;
        let texts = [
            "",
            "x",
            "no answer within 1.0 s",
            "sandbox_image",
            "timed out",
            "connection refused",
            "the container was removed",
            "not found",
            "verify",
        ];
        for t in texts {
            let s = || t.to_string();
            let engine = |kind| EngineError {
                op: Op::CreateContainer,
                kind,
                status: None,
                message: s(),
            };
            let unreachable = |kind, removal| Error::Unreachable {
                endpoint: s(),
                step: Step::Create,
                kind,
                message: s(),
                removal,
            };
            let rejected = |step| Error::Rejected {
                step,
                message: s(),
                fix: None,
                removal: Some(Removal::Left {
                    name: s(),
                    detached: false,
                    why: Some(s()),
                }),
            };
            let exec = |class| Error::Exec {
                message: s(),
                fix: None,
                class,
                started: true,
            };
            let cases: Vec<(Error, odek_code_t)> = vec![
                (
                    unreachable(EngineErrorKind::Timeout, None),
                    ODEK_E_DAEMON_TIMEOUT,
                ),
                (
                    unreachable(EngineErrorKind::Unreachable, Some(Removal::Removed)),
                    ODEK_E_DAEMON_UNREACHABLE,
                ),
                (rejected(Step::Verify), ODEK_E_DOCKER_VERIFY),
                (rejected(Step::Start), ODEK_E_DOCKER_REJECTED),
                (
                    exec(FailureClass::DaemonUnreachable),
                    ODEK_E_DAEMON_UNREACHABLE,
                ),
                (exec(FailureClass::DockerRejected), ODEK_E_EXEC),
                (
                    Error::SandboxStopped {
                        message: s(),
                        fix: None,
                    },
                    ODEK_E_SANDBOX_STOPPED,
                ),
                (
                    ConfigError::InvalidImage {
                        origin: s(),
                        reason: s(),
                    }
                    .into(),
                    ODEK_E_IMAGE_REFERENCE,
                ),
                (
                    ConfigError::InvalidValue {
                        origin: s(),
                        key: s(),
                        reason: s(),
                    }
                    .into(),
                    ODEK_E_CONFIG,
                ),
                (
                    ConfigError::Workdir {
                        path: t.into(),
                        reason: s(),
                        fix: None,
                    }
                    .into(),
                    ODEK_E_CONFIG,
                ),
                (
                    ImageError::PullFailed {
                        reference: s(),
                        message: s(),
                    }
                    .into(),
                    ODEK_E_IMAGE_UNAVAILABLE,
                ),
                (
                    ImageError::Engine(engine(EngineErrorKind::Timeout)).into(),
                    ODEK_E_DAEMON_TIMEOUT,
                ),
                (
                    NetworkError::Engine(engine(EngineErrorKind::Unreachable)).into(),
                    ODEK_E_DAEMON_UNREACHABLE,
                ),
                (
                    NetworkError::Engine(engine(EngineErrorKind::Rejected)).into(),
                    ODEK_E_DOCKER_REJECTED,
                ),
                (
                    NotFound::Unknown { name: s() }.into(),
                    ODEK_E_INVALID_ARGUMENT,
                ),
                (
                    NotFound::Unlisted { name: s() }.into(),
                    ODEK_E_INVALID_ARGUMENT,
                ),
                (NotFound::Gone { name: s() }.into(), ODEK_E_INVALID_ARGUMENT),
                (
                    NotASandbox::Unverified {
                        name: s(),
                        why: s(),
                        container: s(),
                    }
                    .into(),
                    ODEK_E_INVALID_ARGUMENT,
                ),
                (Error::InvalidPlan { reason: s() }, ODEK_E_INVALID_ARGUMENT),
                (Error::InvalidName { name: s() }, ODEK_E_INVALID_ARGUMENT),
                (
                    SecretError {
                        path: s(),
                        reason: s(),
                    }
                    .into(),
                    ODEK_E_INVALID_ARGUMENT,
                ),
                (Error::Usage(s()), ODEK_E_INVALID_ARGUMENT),
                (
                    odek_core::error::FileError {
                        kind: odek_core::error::FileErrorKind::ReadOnly,
                        path: s(),
                        message: s(),
                    }
                    .into(),
                    ODEK_E_FILE,
                ),
                (
                    Error::Cancelled {
                        message: s(),
                        fix: None,
                    },
                    ODEK_E_CANCELLED,
                ),
            ];
            for (e, want) in &cases {
                covered(e);
                assert_eq!(code_of(e), *want, "text {t:?}: {e:?}");
                // The class is the core's, and lies in the code's area.
                let f = Failure::from(e.clone());
                assert_eq!(f.class(), e.reported_class(), "{e:?}");
                assert!(
                    area(f.class()).contains(&(*want as i32 / 100)),
                    "{e:?}: class {} but code {want:?}",
                    f.class()
                );
            }
        }
        // The key is not looked at either: only `InvalidImage` is the
        // image-reference code.
        let keyed = ConfigError::InvalidValue {
            origin: "flag --sandbox-image".into(),
            key: "sandbox_image".into(),
            reason: "x".into(),
        };
        assert_eq!(code_of(&keyed.into()), ODEK_E_CONFIG);
    }

    /// Every variant of the core's error, without a catch-all: a new variant
    /// fails to compile here until it has a row in
    /// `rewording_a_message_changes_no_code`.
    fn covered(e: &Error) {
        match e {
            Error::Config(_)
            | Error::Network(_)
            | Error::Image(_)
            | Error::Approval(_)
            | Error::Narrow(_)
            | Error::Endpoint(_)
            | Error::Unreachable { .. }
            | Error::Rejected { .. }
            | Error::Exec { .. }
            | Error::SandboxStopped { .. }
            | Error::NotFound(_)
            | Error::NotASandbox(_)
            | Error::InvalidPlan { .. }
            | Error::InvalidName { .. }
            | Error::Secret(_)
            | Error::Usage(_)
            | Error::File(_)
            | Error::Cancelled { .. } => {}
        }
    }
}
