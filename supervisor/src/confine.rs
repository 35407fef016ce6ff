//! Capabilities, securebits and signal dispositions: the supervisor's own
//! confinement at start, and the helpers the command's child uses to drop
//! everything before `exec`.

use std::io;

/// `CAP_KILL`: signal any process (the kill of a command's tree).
pub const CAP_KILL: u32 = 5;
/// `CAP_SETGID`: give a command its gid and groups.
pub const CAP_SETGID: u32 = 6;
/// `CAP_SETUID`: give a command its uid.
pub const CAP_SETUID: u32 = 7;
/// `CAP_SETPCAP`: drop a command's bounding set and lock its securebits.
pub const CAP_SETPCAP: u32 = 8;

/// The capability mask the supervisor keeps (effective = permitted).
pub const KEPT: u64 = (1 << CAP_KILL) | (1 << CAP_SETGID) | (1 << CAP_SETUID) | (1 << CAP_SETPCAP);

/// `prctl` options (spelled out so they do not depend on the libc crate's
/// coverage).
pub const PR_SET_DUMPABLE: libc::c_int = 4;
/// `prctl(PR_SET_KEEPCAPS)`.
pub const PR_SET_KEEPCAPS: libc::c_int = 8;
/// `prctl(PR_CAPBSET_DROP)`.
pub const PR_CAPBSET_DROP: libc::c_int = 24;
/// `prctl(PR_SET_SECUREBITS)`.
pub const PR_SET_SECUREBITS: libc::c_int = 28;
/// `prctl(PR_SET_CHILD_SUBREAPER)`.
pub const PR_SET_CHILD_SUBREAPER: libc::c_int = 36;
/// `prctl(PR_SET_NO_NEW_PRIVS)`.
pub const PR_SET_NO_NEW_PRIVS: libc::c_int = 38;
/// `prctl(PR_CAP_AMBIENT)`.
pub const PR_CAP_AMBIENT: libc::c_int = 47;
/// `PR_CAP_AMBIENT_CLEAR_ALL`.
pub const PR_CAP_AMBIENT_CLEAR_ALL: libc::c_ulong = 4;

/// The securebits a command gets, all locked: root is not special
/// (`NOROOT`), uid changes keep capabilities as they are
/// (`NO_SETUID_FIXUP`), and keep-caps stays off.
pub const COMMAND_SECUREBITS: libc::c_ulong = (1 << 0) // SECBIT_NOROOT
    | (1 << 1) // SECBIT_NOROOT_LOCKED
    | (1 << 2) // SECBIT_NO_SETUID_FIXUP
    | (1 << 3) // SECBIT_NO_SETUID_FIXUP_LOCKED
    | (1 << 5); // SECBIT_KEEP_CAPS_LOCKED

/// `_LINUX_CAPABILITY_VERSION_3`.
const CAP_VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// `capset(2)` for the calling thread. Makes no allocation, so the child of
/// a fork may call it. Returns the raw result (0 or -1 with errno).
pub fn capset(effective: u64, permitted: u64, inheritable: u64) -> libc::c_long {
    let mut header = CapHeader {
        version: CAP_VERSION_3,
        pid: 0,
    };
    let data = [
        CapData {
            effective: effective as u32,
            permitted: permitted as u32,
            inheritable: inheritable as u32,
        },
        CapData {
            effective: (effective >> 32) as u32,
            permitted: (permitted >> 32) as u32,
            inheritable: (inheritable >> 32) as u32,
        },
    ];
    // SAFETY: the header and the two data structs are valid for the call.
    unsafe {
        libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        )
    }
}

/// `prctl` with one argument and zeroes.
pub fn prctl(option: libc::c_int, arg: libc::c_ulong) -> libc::c_int {
    // SAFETY: the options used here take integer arguments only.
    unsafe {
        libc::prctl(
            option,
            arg,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    }
}

/// `/proc/sys/kernel/cap_last_cap`: the highest capability number.
pub fn cap_last_cap() -> io::Result<u32> {
    let s = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")?;
    s.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "cap_last_cap unreadable"))
}

/// The `CapEff` hex of `/proc/self/status`.
pub fn cap_eff() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:").map(|v| v.trim().to_string()))
        })
        .unwrap_or_default()
}

/// Signals the supervisor keeps their default action for: the ones it
/// cannot ignore, SIGCHLD (handled by the event loop), and the faults a
/// bug of its own raises (tini does not forward these).
pub const DEFAULT_SIGNALS: [libc::c_int; 9] = [
    libc::SIGKILL,
    libc::SIGSTOP,
    libc::SIGCHLD,
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
    libc::SIGSYS,
];

/// Ignores every other signal, real-time ones included. tini (pid 1, root)
/// forwards to its child every signal it receives but the faults and
/// SIGTTIN/SIGTTOU, and a root command may signal tini (same uid): so a
/// `kill -TSTP 1` or `kill -ALRM 1` would stop or end the supervisor if
/// it kept their default actions. The owner link, not a signal, ends it.
fn ignore_signals() -> io::Result<()> {
    // The standard signals, then the real-time ones glibc leaves to
    // programs (it keeps the two below SIGRTMIN for itself).
    for sig in (1..32).chain(libc::SIGRTMIN()..=libc::SIGRTMAX()) {
        if DEFAULT_SIGNALS.contains(&sig) {
            continue;
        }
        // SAFETY: SIG_IGN is a valid disposition for every signal but
        // SIGKILL and SIGSTOP, which are kept above.
        if unsafe { libc::signal(sig, libc::SIG_IGN) } == libc::SIG_ERR {
            return Err(io::Error::other(format!(
                "signal {sig}: {}",
                io::Error::last_os_error()
            )));
        }
    }
    Ok(())
}

/// Drops the supervisor to `uid`/`gid` keeping only [`KEPT`], non-dumpable,
/// ignoring every signal but [`DEFAULT_SIGNALS`]. Called once by the keeper
/// before it forks a server: the ids, capabilities, the dumpable flag and
/// signal dispositions are inherited by fork (the server makes itself a
/// child subreaper, which is not).
///
/// Errors: the step that failed, for stderr (the caller exits 70).
pub fn confine(uid: u32, gid: u32) -> Result<(), String> {
    fn step(name: &str, r: libc::c_long) -> Result<(), String> {
        if r < 0 {
            Err(format!("{name}: {}", io::Error::last_os_error()))
        } else {
            Ok(())
        }
    }
    step("prctl(PR_SET_KEEPCAPS)", prctl(PR_SET_KEEPCAPS, 1).into())?;
    // SAFETY: an empty group list; no pointer is read.
    step(
        "setgroups",
        unsafe { libc::setgroups(0, std::ptr::null()) }.into(),
    )?;
    // SAFETY: integer arguments only.
    step(
        "setresgid",
        unsafe { libc::setresgid(gid, gid, gid) }.into(),
    )?;
    // SAFETY: integer arguments only.
    step(
        "setresuid",
        unsafe { libc::setresuid(uid, uid, uid) }.into(),
    )?;
    step("capset", capset(KEPT, KEPT, 0))?;
    step(
        "prctl(PR_CAP_AMBIENT_CLEAR_ALL)",
        // SAFETY: integer arguments only.
        unsafe {
            libc::prctl(
                PR_CAP_AMBIENT,
                PR_CAP_AMBIENT_CLEAR_ALL,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
                0 as libc::c_ulong,
            )
        }
        .into(),
    )?;
    step(
        "prctl(PR_SET_KEEPCAPS, 0)",
        prctl(PR_SET_KEEPCAPS, 0).into(),
    )?;
    // Not dumpable: ptrace and /proc/<pid>/fd links then need
    // CAP_SYS_PTRACE, which no process in the sandbox has — not even one
    // that gained this uid and a superset of its capabilities (a `docker
    // exec` as root). The price: its /proc entries belong to root, so a
    // root command can list the numbers of its descriptors (not open them).
    step("prctl(PR_SET_DUMPABLE)", prctl(PR_SET_DUMPABLE, 0).into())?;
    ignore_signals().map_err(|e| format!("ignoring signals: {e}"))?;
    // Confirm from the kernel: the ids stuck and nothing beyond KEPT is left.
    let mut ids = [0u32; 3];
    // SAFETY: getresuid writes three uids into the array we own.
    unsafe { libc::getresuid(&mut ids[0], &mut ids[1], &mut ids[2]) };
    if ids != [uid; 3] {
        return Err(format!("uids are {ids:?} after setresuid({uid})"));
    }
    let eff = u64::from_str_radix(&cap_eff(), 16).unwrap_or(u64::MAX);
    if eff != KEPT {
        return Err(format!("CapEff is {eff:#x}, want {KEPT:#x}"));
    }
    Ok(())
}
