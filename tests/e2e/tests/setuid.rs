//! No setuid file for the host (SPEC §6.1 seccomp profile; docs/SECURITY.md
//! "setuid handed to the host"): whoever the sandbox runs as, root or the
//! operator's own uid, nothing it does can leave a setuid or setgid file, a
//! file capability or a device node in the project — the host honours the
//! bit through its own mount, whatever the container's mount says. Each
//! attempt runs inside a real sandbox (tests/setuid.sh); the files are then
//! checked from the host, and the positive controls show the same calls
//! still work without the set-id bits.

use std::collections::BTreeMap;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use odek_e2e::{docker, operators, stderr, stdout, Operator, Project, BASE_IMAGE};

/// What runs inside the sandbox.
const SCRIPT: &str = include_str!("setuid.sh");

/// Attempts that must fail, and a phrase of the error each must show
/// (empty: any failure).
const MUST_FAIL: &[(&str, &str)] = &[
    ("chmod-u+s", "Operation not permitted"),
    ("chmod-g+s", "Operation not permitted"),
    ("chmod-6755", "Operation not permitted"),
    ("install-4755", "Operation not permitted"),
    ("tar-xp", "Operation not permitted"),
    ("perl-sysopen-4755", "Operation not permitted"),
    ("open-4755", "Operation not permitted"),
    ("creat-2755", "Operation not permitted"),
    ("mknod-reg-4755", "Operation not permitted"),
    ("tmpfile-4755", "Operation not permitted"),
    ("fchmodat2-4755", ""),
    ("fchmod-high-bits", "Operation not permitted"),
    ("chmod-i386-4755", ""),
    ("mknod-char", "Operation not permitted"),
    ("mknod-block", "Operation not permitted"),
    ("mknodat-char", "Operation not permitted"),
    // libc falls back to openat on ENOSYS.
    ("openat2", "Function not implemented"),
    ("io_uring_setup", "Operation not permitted"),
    ("io_uring_enter", "Operation not permitted"),
    ("io_uring_register", "Operation not permitted"),
    ("ln-passwd", "Invalid cross-device link"),
    ("setcap", ""),
];

/// Attempts that must succeed (positive controls), and the filter checks.
const MUST_PASS: &[&str] = &[
    "seccomp-init",
    "seccomp-self",
    "ok-chmod-0755",
    "ok-install-0755",
    "ok-perl-sysopen-0644",
    "ok-open-0640",
    "ok-creat-0600",
    "ok-openat-read",
    "ok-openat-read-junk-mode",
    "ok-tmpfile-0600",
    "ok-fchmodat2-0700",
    "ok-mknod-reg-0644",
    "ok-mkfifo",
    "ok-chmod-i386-0750",
    "ok-cat",
];

/// Files the positive controls leave, with their permission bits.
const CONTROL_MODES: &[(&str, u32)] = &[
    ("ok-chmod", 0o755),
    ("ok-install", 0o755),
    ("ok-sysopen", 0o644),
    ("ok-open", 0o640),
    ("ok-creat", 0o600),
    ("ok-tmpfile", 0o600),
    ("ok-fchmodat2", 0o700),
    ("ok-mknod", 0o644),
    ("ok-fifo", 0o644),
    ("i386-target", 0o750),
    ("tarred/plain-file", 0o755),
];

#[test]
fn no_call_leaves_a_setuid_file_or_a_device_for_the_host() {
    if cfg!(not(target_arch = "x86_64")) {
        panic!("tests/setuid.sh calls system calls by their x86_64 numbers, and the 32-bit attempt is x86 code: add this architecture's");
    }
    for op in operators() {
        attempt_everything(op);
    }
}

fn attempt_everything(op: Operator) {
    let p = Project::as_operator(op);
    let dir = p.path();
    std::fs::write(dir.join("suid.tar"), set_id_archive()).expect("write the archive");
    for (name, target, mode) in [
        ("chmod-i386-4755", "i386-suid", 0o4755),
        ("chmod-i386-0750", "i386-target", 0o750),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, i386_chmod_program(target.as_bytes(), mode)).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let out = p.run_odek(&[
        "run",
        "--sandbox",
        "--sandbox-image",
        BASE_IMAGE,
        "--",
        "sh",
        "-c",
        SCRIPT,
    ]);
    let report = stdout(&out);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{op:?}: the script did not run to its end\nstdout:\n{report}\nstderr:\n{}",
        stderr(&out)
    );
    let results: BTreeMap<&str, (i32, &str)> = report
        .lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ' ');
            let name = f.next()?;
            let st = f.next()?.parse().ok()?;
            Some((name, (st, f.next().unwrap_or(""))))
        })
        .collect();
    for (name, phrase) in MUST_FAIL {
        let (st, err) = results
            .get(name)
            .unwrap_or_else(|| panic!("{op:?}: no result for {name}:\n{report}"));
        assert_ne!(*st, 0, "{op:?}: {name} succeeded:\n{report}");
        assert!(
            err.contains(phrase),
            "{op:?}: {name}: {err:?} lacks {phrase:?}"
        );
    }
    for name in MUST_PASS {
        let (st, err) = results
            .get(name)
            .unwrap_or_else(|| panic!("{op:?}: no result for {name}:\n{report}"));
        assert_eq!(*st, 0, "{op:?}: control {name} failed ({err}):\n{report}");
    }
    // From the host: no set-id bit, no device node, no file capability.
    let found = set_id_or_devices(&dir);
    assert!(
        found.is_empty(),
        "{op:?}: left for the host: {found:#?}\nsandbox report:\n{report}"
    );
    // The controls' files are there, with their modes, and the sandbox's.
    let sandbox_uid = op.uid();
    for (name, mode) in CONTROL_MODES {
        let m = std::fs::symlink_metadata(dir.join(name))
            .unwrap_or_else(|e| panic!("{op:?}: control file {name}: {e}\n{report}"));
        assert_eq!(m.mode() & 0o7777, *mode, "{op:?}: {name}");
        assert_eq!(
            m.uid(),
            sandbox_uid,
            "{op:?}: {name} is not the sandbox user's"
        );
    }
    assert!(std::fs::symlink_metadata(dir.join("ok-fifo"))
        .expect("fifo")
        .file_type()
        .is_fifo());
    // The image's setuid binary was copied, without the bits (checked
    // above): as root, cp's chmod was refused; as another user, cp drops
    // them itself once it cannot give the copy root's ownership.
    let copy = std::fs::metadata(dir.join("passwd-copy")).expect("cp -p made the file");
    assert_eq!(copy.mode() & 0o6000, 0);
    if op == Operator::Root {
        let (st, err) = results["cp-p-passwd"];
        assert!(
            st != 0 && err.contains("Operation not permitted"),
            "{report}"
        );
    }
    // The 32-bit attempt was refused by the filter (EPERM), not for want
    // of the 32-bit table: the control above went through it.
    assert_eq!(results["chmod-i386-4755"].0, 1, "{report}");
    assert!(p.leftovers().is_empty(), "{op:?}: sandbox left");
}

/// Every file below `dir` (not following symlinks) with a set-id bit, a
/// character or block device, or a `security.capability` attribute.
fn set_id_or_devices(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let m = std::fs::symlink_metadata(&d).expect("stat");
        if m.mode() & 0o6000 != 0 {
            found.push(format!("{} mode {:o}", d.display(), m.mode()));
        }
        let t = m.file_type();
        if t.is_char_device() || t.is_block_device() {
            found.push(format!("{} is a device node", d.display()));
        }
        if !t.is_symlink() {
            let mut buf = [0u8; 64];
            if rustix::fs::lgetxattr(&d, "security.capability", &mut buf).is_ok() {
                found.push(format!("{} has a file capability", d.display()));
            }
        }
        if t.is_dir() {
            for e in std::fs::read_dir(&d).expect("read_dir") {
                stack.push(e.expect("entry").path());
            }
        }
    }
    found
}

/// A tar archive (ustar) holding `suid-file` (04755, root's), `sgid-dir/`
/// (02755) and `plain-file` (0755).
fn set_id_archive() -> Vec<u8> {
    let mut out = Vec::new();
    for (name, mode, dir) in [
        ("suid-file", 0o4755, false),
        ("sgid-dir/", 0o2755, true),
        ("plain-file", 0o755, false),
    ] {
        let body: &[u8] = if dir { b"" } else { b"#!/bin/sh\necho hi\n" };
        let mut h = [0u8; 512];
        let mut field =
            |at: usize, text: &str| h[at..at + text.len()].copy_from_slice(text.as_bytes());
        field(0, name);
        field(100, &format!("{mode:07o}\0"));
        field(108, "0000000\0");
        field(116, "0000000\0");
        field(124, &format!("{:011o}\0", body.len()));
        field(136, "00000000000\0");
        field(148, "        ");
        field(156, if dir { "5" } else { "0" });
        field(257, "ustar\0");
        field(263, "00");
        let sum: u32 = h.iter().map(|b| u32::from(*b)).sum();
        h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(body);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

/// A static x86_64 ELF program that calls `chmod(path, mode)` through the
/// 32-bit system call table (`int 0x80`, call 15) and exits with the errno
/// (0 on success): the table a profile must cover beside the 64-bit one.
fn i386_chmod_program(path: &[u8], mode: u32) -> Vec<u8> {
    const BASE: u64 = 0x40_0000;
    const CODE_AT: u64 = 64 + 56;
    let mut code: Vec<u8> = Vec::new();
    let path_at = u32::try_from(BASE + CODE_AT + 28).expect("below 4 GiB");
    code.extend([0xb8, 15, 0, 0, 0]); // mov eax, 15 (i386 chmod)
    code.push(0xbb); // mov ebx, path
    code.extend(path_at.to_le_bytes());
    code.push(0xb9); // mov ecx, mode
    code.extend(mode.to_le_bytes());
    code.extend([0xcd, 0x80]); // int 0x80
    code.extend([0xf7, 0xd8]); // neg eax
    code.extend([0x89, 0xc7]); // mov edi, eax
    code.extend([0xb8, 60, 0, 0, 0]); // mov eax, 60 (exit)
    code.extend([0x0f, 0x05]); // syscall
    assert_eq!(code.len(), 28);
    code.extend(path);
    code.push(0);
    let size = CODE_AT + code.len() as u64;
    let mut elf: Vec<u8> = Vec::new();
    elf.extend([0x7f, b'E', b'L', b'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    elf.extend(2u16.to_le_bytes()); // ET_EXEC
    elf.extend(0x3eu16.to_le_bytes()); // x86-64
    elf.extend(1u32.to_le_bytes());
    elf.extend((BASE + CODE_AT).to_le_bytes()); // entry
    elf.extend(64u64.to_le_bytes()); // program headers
    elf.extend(0u64.to_le_bytes()); // no section headers
    elf.extend(0u32.to_le_bytes());
    elf.extend(64u16.to_le_bytes());
    elf.extend(56u16.to_le_bytes());
    elf.extend(1u16.to_le_bytes());
    elf.extend([0u8; 6]);
    elf.extend(1u32.to_le_bytes()); // PT_LOAD
    elf.extend(5u32.to_le_bytes()); // R X
    elf.extend(0u64.to_le_bytes());
    elf.extend(BASE.to_le_bytes());
    elf.extend(BASE.to_le_bytes());
    elf.extend(size.to_le_bytes());
    elf.extend(size.to_le_bytes());
    elf.extend(0x1000u64.to_le_bytes());
    assert_eq!(elf.len() as u64, CODE_AT);
    elf.extend(code);
    elf
}

#[test]
fn the_sandbox_carries_odeks_profile_and_dockers_default_would_not_stop_the_bit() {
    // Control for the test above: under Docker's default profile the same
    // container settings otherwise (no capabilities, no-new-privileges)
    // put the bit on, so a clean project proves the profile, not the
    // image or the kernel.
    let p = Project::new();
    let dir = p.path();
    // As the operator's own uid:gid (the project's owner), as odek's
    // sandbox runs: with every capability dropped, root in the container
    // could not write a non-root operator's project.
    let meta = std::fs::metadata(&dir).expect("project dir");
    let user = format!("{}:{}", meta.uid(), meta.gid());
    let out = docker(&[
        "run",
        "--rm",
        "--label",
        odek_e2e::TEST_LABEL,
        "--user",
        &user,
        "--cap-drop",
        "ALL",
        "--security-opt",
        "no-new-privileges",
        "--network",
        "none",
        "-v",
        &format!("{}:/workspace", dir.display()),
        "-w",
        "/workspace",
        BASE_IMAGE,
        "sh",
        "-c",
        "cp /bin/sh x && chmod u+s x && echo done",
    ]);
    assert_eq!(out, "done");
    let m = std::fs::metadata(dir.join("x")).expect("x");
    assert_eq!(m.mode() & 0o4000, 0o4000, "Docker's default allows the bit");
    std::fs::remove_file(dir.join("x")).expect("rm");
    // odek's sandbox: the profile is in the engine's record.
    let out = p.odek_ok(&["sandbox", "up", "--sandbox-image", BASE_IMAGE]);
    let name = stdout(&out).trim().to_string();
    let opts = docker(&["inspect", "-f", "{{json .HostConfig.SecurityOpt}}", &name]);
    let opts: Vec<String> = serde_json::from_str(&opts).expect("SecurityOpt");
    let _ = p.run_odek(&["sandbox", "down", &name]);
    assert_eq!(opts.len(), 2, "{opts:?}");
    assert_eq!(opts[0], "no-new-privileges");
    let profile: serde_json::Value = serde_json::from_str(
        opts[1]
            .strip_prefix("seccomp=")
            .expect("a seccomp profile, inline"),
    )
    .expect("JSON");
    assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO");
}
