//! Exec (SPEC §10.1) and finding sandboxes again (list, gc) against the fake
//! engine; fallback exec runs on the host for real.

mod common;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use common::*;
use odek_core::engine::{ContainerSpec, DockerApi, EngineErrorKind, Fault, Op, Quirks, StreamKind};
use odek_core::labels::{self, Owner};
use odek_core::{CancellationToken, Command, ExecOptions, ExecRequest, FailureClass, Isolation};

fn req(command: Command) -> ExecRequest {
    ExecRequest {
        command,
        env: Vec::new(),
        timeout: None,
        workdir: None,
    }
}

/// Collects streamed output.
#[derive(Default)]
struct Out(Mutex<Vec<(StreamKind, Vec<u8>)>>);

impl Out {
    fn sink(&self) -> impl Fn(StreamKind, &[u8]) + Send + Sync + '_ {
        move |k, b| self.0.lock().expect("lock").push((k, b.to_vec()))
    }

    fn stderr(&self) -> String {
        let v = self.0.lock().expect("lock");
        String::from_utf8_lossy(
            &v.iter()
                .filter(|(k, _)| *k == StreamKind::Stderr)
                .flat_map(|(_, b)| b.clone())
                .collect::<Vec<u8>>(),
        )
        .into_owned()
    }

    fn stdout(&self) -> String {
        let v = self.0.lock().expect("lock");
        String::from_utf8_lossy(
            &v.iter()
                .filter(|(k, _)| *k == StreamKind::Stdout)
                .flat_map(|(_, b)| b.clone())
                .collect::<Vec<u8>>(),
        )
        .into_owned()
    }
}

// ---------------------------------------------------------------------------
// Exec

#[tokio::test]
async fn exit_code_and_output_pass_through() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_exit: 3,
        exec_stdout: b"from the sandbox\n".to_vec(),
        ..Quirks::default()
    });
    let out = Out::default();
    let sink = out.sink();
    let r = s
        .odek
        .exec(
            &sb,
            &req(Command::Shell("exit 3".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect("a non-zero exit is not an error");
    assert_eq!(r.exit_code, 3);
    assert!(!r.timed_out);
    assert_eq!(out.stdout(), "from the sandbox\n");
    let execs = s.fake.calls_of(Op::Exec);
    assert_eq!(execs.len(), 1);
    assert_eq!(execs[0].arg, "/bin/sh -c exit 3");
}

/// A program the sandbox lacks, through the exec API: the engine says it
/// never started, and the command gets 127 and odek's one line on stderr
/// (the same line as through the supervisor), nothing on stdout.
#[tokio::test]
async fn a_missing_program_exits_127_with_odeks_one_line() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_not_found: Some("no-such-tool".into()),
        ..Quirks::default()
    });
    let out = Out::default();
    let sink = out.sink();
    let r = s
        .odek
        .exec(
            &sb,
            &req(Command::Argv(vec!["no-such-tool".into()])),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect("a status, not an odek error");
    assert_eq!(r.exit_code, 127);
    assert_eq!(out.stdout(), "");
    assert_eq!(
        out.stderr(),
        format!(
            "odek: cannot run `no-such-tool` in sandbox {}: command not found; nothing ran\n",
            sb.name
        )
    );
    // Control: another program runs and keeps its own status.
    let r = s
        .odek
        .exec(
            &sb,
            &req(Command::Argv(vec!["true".into()])),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect("exec");
    assert_eq!(r.exit_code, 0);
}

#[tokio::test]
async fn exec_runs_argv_in_the_workspace_with_extra_env() {
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    let request = ExecRequest {
        command: Command::Argv(vec![
            "redis-cli".into(),
            "-h".into(),
            "redis".into(),
            "ping".into(),
        ]),
        env: vec![("B".into(), "2".into()), ("A".into(), "1".into())],
        timeout: None,
        workdir: None,
    };
    let sink = |_: StreamKind, _: &[u8]| {};
    let r = s
        .odek
        .exec(&sb, &request, &ExecOptions::default(), &sink)
        .await
        .expect("exec");
    assert_eq!(r.exit_code, 0);
    let spec = &spy.execs()[0];
    assert_eq!(
        spec.cmd,
        vec!["redis-cli", "-h", "redis", "ping"],
        "argv as is, no shell"
    );
    assert_eq!(spec.working_dir.as_deref(), Some("/workspace"));
    assert_eq!(spec.env[..2], ["A=1".to_string(), "B=2".to_string()]);
    assert_eq!(spec.env.len(), 3, "{:?}", spec.env);
    tag_of(spec);
}

/// The `ODEK_EXEC_ID=<32 hex>` entry of an exec's environment.
fn tag_of(spec: &odek_core::engine::ExecSpec) -> String {
    let tags: Vec<&String> = spec
        .env
        .iter()
        .filter(|e| e.starts_with(&format!("{}=", odek_core::exec::EXEC_TAG_ENV)))
        .collect();
    assert_eq!(tags.len(), 1, "one tag per exec: {:?}", spec.env);
    let hex = &tags[0][odek_core::exec::EXEC_TAG_ENV.len() + 1..];
    assert!(
        hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()),
        "{hex}"
    );
    tags[0].clone()
}

/// Collects the stderr of an exec.
fn stderr_sink(buf: &Mutex<Vec<u8>>) -> impl Fn(StreamKind, &[u8]) + Send + Sync + '_ {
    move |k, b| {
        if k == StreamKind::Stderr {
            buf.lock().expect("lock").extend_from_slice(b)
        }
    }
}

#[tokio::test]
async fn a_command_that_outlives_its_timeout_is_killed_by_its_tag() {
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_hangs: Some("sleep".into()),
        ..Quirks::default()
    });
    let mut r = req(Command::Argv(vec!["sleep".into(), "300".into()]));
    r.timeout = Some(Duration::from_millis(100));
    let err = Mutex::new(Vec::new());
    let sink = stderr_sink(&err);
    let out = s
        .odek
        .exec(&sb, &r, &ExecOptions::default(), &sink)
        .await
        .expect("a timeout is not an error");
    assert!(out.timed_out && out.killed && !out.cancelled, "{out:?}");
    assert_eq!(out.exit_code, 124);
    let execs = spy.execs();
    assert_eq!(
        execs.len(),
        4,
        "the command, the is-it-still-running check, the kill, the count: {execs:?}"
    );
    let tag = tag_of(&execs[0]);
    for (spec, mode) in [
        (&execs[1], "main"),
        (&execs[2], "kill"),
        (&execs[3], "count"),
    ] {
        assert_eq!(spec.cmd[..2], ["/bin/sh".to_string(), "-c".to_string()]);
        assert!(spec.cmd[2].contains("kill -KILL"), "{}", spec.cmd[2]);
        assert_eq!(
            spec.cmd[3..6],
            ["odek-kill".to_string(), tag.clone(), mode.to_string()],
            "by this exec's tag"
        );
        // Its own environment holds only the probe that checks `cat`, never
        // the tag (or it would kill itself).
        assert_eq!(spec.env.len(), 1, "{:?}", spec.env);
        assert!(
            spec.env[0].starts_with("ODEK_KILL_PROBE="),
            "{:?}",
            spec.env
        );
        assert_eq!(
            spec.cmd[6], spec.env[0],
            "the probe it looks for is its own"
        );
    }
    assert!(
        err.lock().expect("lock").is_empty(),
        "a kill that worked is silent"
    );
    // Each exec has its own tag.
    s.fake.set_quirks(Quirks::default());
    s.odek
        .exec(
            &sb,
            &req(Command::Shell("true".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect("exec");
    assert_ne!(tag_of(&spy.execs()[0]), tag_of(&spy.execs()[4]));
}

#[tokio::test]
async fn a_command_that_exited_but_whose_output_is_still_open_keeps_its_status() {
    // A background child holds the command's stdout: Docker keeps the
    // stream open after the command itself exited. The timeout fires, the
    // check finds the command's own process gone, and odek waits for the
    // stream: exit status as the command left it, nothing killed.
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_delay: Some(Duration::from_millis(400)),
        exec_exit: 3,
        main_exited: true,
        ..Quirks::default()
    });
    let mut r = req(Command::Shell("sleep 30 & exit 3".into()));
    r.timeout = Some(Duration::from_millis(100));
    let sink = |_: StreamKind, _: &[u8]| {};
    let out = s
        .odek
        .exec(&sb, &r, &ExecOptions::default(), &sink)
        .await
        .expect("exec");
    assert_eq!(out.exit_code, 3, "{out:?}");
    assert!(!out.timed_out && !out.killed, "{out:?}");
    let execs = spy.execs();
    assert_eq!(
        execs.len(),
        2,
        "the command and the check, no kill: {execs:?}"
    );
    assert_eq!(execs[1].cmd[5], "main");
}

#[tokio::test]
async fn an_untagged_exec_process_means_the_command_may_still_run() {
    // The main check finds no tagged process of the command, but an exec
    // process without any tag: it may be the command under a new process
    // title, so odek does not wait for a status; it times the command out
    // and does not claim the kill.
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_delay: Some(Duration::from_secs(60)),
        main_exited: true,
        kill_strangers: 1,
        ..Quirks::default()
    });
    let mut r = req(Command::Argv(vec!["redis-server".into()]));
    r.timeout = Some(Duration::from_millis(100));
    let sink = |_: StreamKind, _: &[u8]| {};
    let started = std::time::Instant::now();
    let out = s
        .odek
        .exec(&sb, &r, &ExecOptions::default(), &sink)
        .await
        .expect("exec");
    assert!(out.timed_out && !out.killed, "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "waited for a status: {:?}",
        started.elapsed()
    );
    let modes: Vec<String> = spy.execs()[1..].iter().map(|e| e.cmd[5].clone()).collect();
    assert_eq!(modes[..3], ["main", "kill", "count"]);
}

#[tokio::test(start_paused = true)]
async fn an_exited_command_whose_output_stays_open_too_long_is_timed_out() {
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_delay: Some(Duration::from_secs(60)),
        main_exited: true,
        ..Quirks::default()
    });
    let mut r = req(Command::Shell("sleep 300 & exit 0".into()));
    r.timeout = Some(Duration::from_millis(100));
    let sink = |_: StreamKind, _: &[u8]| {};
    let out = s
        .odek
        .exec(&sb, &r, &ExecOptions::default(), &sink)
        .await
        .expect("exec");
    assert!(out.timed_out && out.killed, "{out:?}");
    let modes: Vec<String> = spy.execs()[1..].iter().map(|e| e.cmd[5].clone()).collect();
    assert_eq!(modes, ["main", "kill", "count"]);
}

#[tokio::test]
async fn a_command_that_ends_in_time_is_not_killed() {
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    let mut r = req(Command::Shell("true".into()));
    r.timeout = Some(Duration::from_secs(30));
    let sink = |_: StreamKind, _: &[u8]| {};
    let out = s
        .odek
        .exec(&sb, &r, &ExecOptions::default(), &sink)
        .await
        .expect("exec");
    assert!(!out.timed_out && !out.killed && !out.cancelled, "{out:?}");
    assert_eq!(spy.execs().len(), 1, "no kill exec");
}

#[tokio::test]
async fn a_kill_that_fails_or_leaves_processes_is_said_and_not_claimed() {
    for (kill_exit, survivors, strangers, why) in [
        (127, 0, 0, "no /bin/sh or cat"),
        (3, 0, 0, "no /bin/sh or cat"),
        (4, 0, 0, "does not show process environments"),
        (2, 0, 0, "could not fork"),
        (5, 0, 0, "the kill exited with status 5"),
        (1, 7, 0, "7 of its processes still run after 3 kill rounds"),
        (0, 2, 0, "2 of its processes still run"),
        // An exec process without any tag (a command that rewrote its
        // environment to set its title looks like this): no claim.
        (
            0,
            0,
            1,
            "1 process(es) started by an exec carry no ODEK_EXEC_ID tag",
        ),
    ] {
        let s = Setup::new();
        let sb = s.up().await.expect("launch");
        s.fake.set_quirks(Quirks {
            exec_hangs: Some("sleep".into()),
            kill_exit,
            kill_survivors: survivors,
            kill_strangers: strangers,
            ..Quirks::default()
        });
        let mut r = req(Command::Argv(vec!["sleep".into(), "300".into()]));
        r.timeout = Some(Duration::from_millis(50));
        let err = Mutex::new(Vec::new());
        let sink = stderr_sink(&err);
        let out = s
            .odek
            .exec(&sb, &r, &ExecOptions::default(), &sink)
            .await
            .expect("timeout");
        assert!(out.timed_out && !out.killed, "{kill_exit}: {out:?}");
        drop(sink);
        let msg = String::from_utf8(err.into_inner().expect("lock")).expect("utf8");
        assert!(
            msg.contains("could not kill the command")
                && msg.contains(why)
                && msg.contains(&sb.name),
            "{kill_exit}: {msg}"
        );
    }
}

#[tokio::test]
async fn a_cancelled_command_is_killed_and_says_cancelled() {
    let (s, spy) = spied();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_hangs: Some("sleep".into()),
        ..Quirks::default()
    });
    let r = req(Command::Argv(vec!["sleep".into(), "300".into()]));
    let sink = |_: StreamKind, _: &[u8]| {};
    let token = CancellationToken::new();
    let opts = ExecOptions {
        cancel: Some(token.clone()),
        ..ExecOptions::default()
    };
    let cancel = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        token.cancel();
    };
    let (out, ()) = tokio::join!(s.odek.exec(&sb, &r, &opts, &sink), cancel);
    let out = out.expect("cancel is not an error");
    assert!(out.cancelled && out.killed && !out.timed_out, "{out:?}");
    assert_eq!(out.exit_code, 130);
    let execs = spy.execs();
    assert_eq!(execs.len(), 3);
    assert_eq!(execs[1].cmd[4], tag_of(&execs[0]));
}

#[tokio::test]
async fn exec_on_a_removed_container_is_an_error() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    s.odek.destroy(&sb).await.expect("destroy");
    let sink = |_: StreamKind, _: &[u8]| {};
    let err = s
        .odek
        .exec(
            &sb,
            &req(Command::Shell("true".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect_err("container gone");
    assert_eq!(err.class(), FailureClass::DockerRejected, "{err}");
    assert!(
        err.to_string().contains(&sb.name),
        "names the sandbox: {err}"
    );
}

#[tokio::test]
async fn exec_in_a_stopped_sandbox_says_how_to_get_a_new_one() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    s.fake
        .stop_container(sb.container_id.as_deref().expect("container"));
    let sink = |_: StreamKind, _: &[u8]| {};
    let err = s
        .odek
        .exec(
            &sb,
            &req(Command::Shell("true".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect_err("stopped");
    assert_eq!(err.class(), FailureClass::DockerRejected, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("is stopped") && msg.contains(&format!("odek sandbox down {}", sb.name)),
        "{msg}"
    );
}

#[tokio::test]
async fn exec_with_the_daemon_gone_is_daemon_unreachable() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    s.fake
        .fail(Fault::new(Op::Exec, 1, EngineErrorKind::Unreachable));
    let sink = |_: StreamKind, _: &[u8]| {};
    let err = s
        .odek
        .exec(
            &sb,
            &req(Command::Shell("true".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect_err("unreachable");
    assert_eq!(err.class(), FailureClass::DaemonUnreachable, "{err}");
}

#[tokio::test]
async fn empty_or_nul_commands_are_refused_before_docker() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let before = s.fake.calls().len();
    let sink = |_: StreamKind, _: &[u8]| {};
    for bad in [
        Command::Argv(Vec::new()),
        Command::Argv(vec![String::new()]),
        Command::Argv(vec!["echo".into(), "a\0b".into()]),
    ] {
        let err = s
            .odek
            .exec(&sb, &req(bad), &ExecOptions::default(), &sink)
            .await
            .expect_err("refused");
        assert_eq!(err.class(), FailureClass::Config, "{err}");
    }
    let mut bad_env = req(Command::Shell("true".into()));
    bad_env.env = vec![("1BAD".into(), "x".into())];
    assert!(s
        .odek
        .exec(&sb, &bad_env, &ExecOptions::default(), &sink)
        .await
        .is_err());
    bad_env.env = vec![("ODEK_EXEC_ID".into(), "x".into())];
    let err = s
        .odek
        .exec(&sb, &bad_env, &ExecOptions::default(), &sink)
        .await
        .expect_err("reserved");
    assert!(err.to_string().contains("reserved"), "{err}");
    assert!(
        bad_env.check().is_err(),
        "check() says the same before any launch"
    );
    assert_eq!(s.fake.calls().len(), before, "no Docker call");
}

/// Every exec and file call in a container is recorded in the sandbox's
/// log (docs/SECURITY.md, "The record of what ran") with its command or
/// path and its env keys — never an env value — whatever its outcome; a
/// refused request too. The record outlives the sandbox's removal; a
/// command on the host has no sandbox and no record.
#[tokio::test]
async fn every_exec_and_file_call_is_recorded_without_env_values() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    s.fake.set_quirks(Quirks {
        exec_exit: 3,
        ..Quirks::default()
    });
    let out = Out::default();
    let sink = out.sink();
    let mut with_env = req(Command::Argv(vec!["printenv".into(), "API_TOKEN".into()]));
    with_env.env = vec![("API_TOKEN".into(), "tok-4f1c-secret".into())];
    let run = ExecOptions {
        tool: Some("run"),
        ..ExecOptions::default()
    };
    let r = s
        .odek
        .exec(&sb, &with_env, &run, &sink)
        .await
        .expect("runs");
    assert_eq!(r.exit_code, 3);
    s.odek
        .exec(
            &sb,
            &req(Command::Shell("echo hi".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect("runs");
    s.odek
        .exec(
            &sb,
            &req(Command::Argv(vec![])),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect_err("an empty argv is refused");
    let read = odek_core::files::ReadFileRequest {
        schema: None,
        path: "notes.txt".into(),
        encoding: Default::default(),
        offset: None,
        length: None,
    };
    s.odek
        .read_file(&sb, &read, &ExecOptions::default())
        .await
        .expect_err("no supervisor in the fake's sandbox");
    let log = odek_core::audit::read(&s.odek_home, &sb.name)
        .expect("readable")
        .expect("a log");
    let raw = std::fs::read_to_string(&log.path).expect("read");
    assert!(!raw.contains("tok-4f1c-secret"), "{raw}");
    let tools: Vec<&str> = log.records.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(tools, ["run", "exec", "exec", "read_file"], "{raw}");
    let first = &log.records[0];
    assert_eq!(first.surface, "cli");
    assert_eq!(
        first.command.as_deref(),
        Some(&["printenv".to_string(), "API_TOKEN".to_string()][..])
    );
    assert_eq!(first.env_keys, ["API_TOKEN"]);
    assert_eq!(first.exit_code, Some(3));
    assert_eq!(first.outcome.as_deref(), Some("exited"));
    assert_eq!(
        log.records[1].command.as_deref(),
        Some(
            &[
                "/bin/sh".to_string(),
                "-c".to_string(),
                "echo hi".to_string()
            ][..]
        )
    );
    assert_eq!(log.records[2].error.as_deref(), Some("usage"));
    assert_eq!(log.records[3].path.as_deref(), Some("/workspace/notes.txt"));
    assert_eq!(
        log.records[3].error.as_deref(),
        Some("refused: no_supervisor")
    );
    // Removed: the record stays (the default keeps it 7 days).
    s.odek.destroy(&sb).await.expect("destroy");
    let after = odek_core::audit::read(&s.odek_home, &sb.name)
        .expect("readable")
        .expect("kept after the sandbox is gone");
    assert_eq!(after.records.len(), 4);
    // On the host: nothing recorded.
    s.fake.set_reachable(false);
    let plan = s.resolve().await.expect("fallback plan");
    let host = s.launch(&plan).await.expect("host");
    s.odek
        .exec(
            &host,
            &req(Command::Shell("true".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect("runs on the host");
    assert_eq!(
        odek_core::audit::sandboxes(&s.odek_home),
        [sb.name.as_str()]
    );
}

#[tokio::test]
async fn fallback_exec_runs_on_the_host() {
    let s = Setup::new();
    s.fake.set_reachable(false);
    let plan = s.resolve().await.expect("fallback plan");
    assert!(matches!(plan.isolation, Isolation::Fallback(_)));
    let sb = s.launch(&plan).await.expect("host");
    let out = Out::default();
    let sink = out.sink();
    let r = s
        .odek
        .exec(
            &sb,
            &req(Command::Shell("echo hi".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect("runs on the host");
    assert_eq!(r.exit_code, 0);
    assert_eq!(out.stdout(), "hi\n");
    // In the working directory, with exit codes passed through.
    let out = Out::default();
    let sink = out.sink();
    let r = s
        .odek
        .exec(
            &sb,
            &req(Command::Shell("pwd; exit 7".into())),
            &ExecOptions::default(),
            &sink,
        )
        .await
        .expect("runs");
    assert_eq!(r.exit_code, 7);
    assert_eq!(out.stdout().trim_end(), s.workdir.display().to_string());
    assert_eq!(s.fake.calls_of(Op::Exec).len(), 0, "never through Docker");
}

#[tokio::test]
async fn a_host_command_that_cannot_start_exits_127_or_126_like_a_shell() {
    let s = Setup::new().no_sandbox();
    let sb = s.up().await.expect("host");
    let not_exec = s.workdir.join("plain.txt");
    std::fs::write(&not_exec, "not a program").expect("w");
    // Executable, but no format the kernel knows (ENOEXEC).
    let bad_elf = s.workdir.join("badelf");
    std::fs::write(&bad_elf, b"\x7fELF garbage").expect("w");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bad_elf, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    for (argv, code) in [
        (vec!["odek-no-such-command-xyz".to_string()], 127),
        (vec![not_exec.display().to_string()], 126),
        (vec![bad_elf.display().to_string()], 126),
    ] {
        let err = std::sync::Mutex::new(Vec::new());
        let sink = |k: StreamKind, b: &[u8]| {
            if k == StreamKind::Stderr {
                err.lock().expect("lock").extend_from_slice(b)
            }
        };
        let out = s
            .odek
            .exec(
                &sb,
                &req(Command::Argv(argv.clone())),
                &ExecOptions::default(),
                &sink,
            )
            .await
            .expect("a status, not an odek error");
        assert_eq!(out.exit_code, code, "{argv:?}");
        let msg = String::from_utf8(err.into_inner().expect("lock")).expect("utf8");
        assert!(
            msg.contains("cannot run") && msg.contains(&argv[0]),
            "{msg}"
        );
    }
}

#[tokio::test]
async fn fallback_exec_times_out_with_124() {
    let s = Setup::new().no_sandbox();
    let sb = s.up().await.expect("host");
    let mut r = req(Command::Shell("sleep 5".into()));
    r.timeout = Some(Duration::from_millis(200));
    let sink = |_: StreamKind, _: &[u8]| {};
    let started = std::time::Instant::now();
    let out = s
        .odek
        .exec(&sb, &r, &ExecOptions::default(), &sink)
        .await
        .expect("timeout is not an error");
    assert!(out.timed_out);
    assert_eq!(out.exit_code, 124);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "did not wait for the command"
    );
}

/// True while `pid` exists and is not a zombie.
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
            state != Some('Z') && state != Some('X')
        }
        Err(_) => false,
    }
}

/// Waits up to 3 s for `pid` to die.
async fn dies(pid: u32) -> bool {
    for _ in 0..60 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A host command that starts a background child and records its PID.
fn forks_a_child(dir: &std::path::Path) -> (ExecRequest, std::path::PathBuf) {
    let pidfile = dir.join("child.pid");
    let r = req(Command::Shell(format!(
        "sleep 60 & echo $! > {}.tmp && mv {0}.tmp {0}; sleep 60",
        pidfile.display()
    )));
    (r, pidfile)
}

async fn child_pid(pidfile: &std::path::Path) -> u32 {
    for _ in 0..100 {
        if let Ok(s) = std::fs::read_to_string(pidfile) {
            return s.trim().parse().expect("pid");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the command never wrote {}", pidfile.display());
}

#[tokio::test]
async fn a_timed_out_host_command_is_killed_with_its_children() {
    let s = Setup::new().no_sandbox();
    let sb = s.up().await.expect("host");
    let (mut r, pidfile) = forks_a_child(&s.workdir);
    r.timeout = Some(Duration::from_millis(500));
    let sink = |_: StreamKind, _: &[u8]| {};
    let out = s
        .odek
        .exec(&sb, &r, &ExecOptions::default(), &sink)
        .await
        .expect("timeout");
    assert!(out.timed_out && out.killed, "{out:?}");
    let pid = child_pid(&pidfile).await;
    assert!(dies(pid).await, "the background child {pid} still runs");
}

#[tokio::test]
async fn a_cancelled_host_command_is_killed_with_its_children() {
    let s = Setup::new().no_sandbox();
    let sb = s.up().await.expect("host");
    let (r, pidfile) = forks_a_child(&s.workdir);
    let sink = |_: StreamKind, _: &[u8]| {};
    let seen = std::sync::atomic::AtomicU32::new(0);
    let token = CancellationToken::new();
    let opts = ExecOptions {
        cancel: Some(token.clone()),
        ..ExecOptions::default()
    };
    let cancel = async {
        let pid = child_pid(&pidfile).await;
        // Positive control: the child runs until the cancellation.
        assert!(alive(pid), "the child {pid} should be running");
        seen.store(pid, std::sync::atomic::Ordering::SeqCst);
        token.cancel();
    };
    let (out, ()) = tokio::join!(s.odek.exec(&sb, &r, &opts, &sink), cancel);
    let out = out.expect("cancel");
    assert!(out.cancelled && out.killed, "{out:?}");
    let pid = seen.load(std::sync::atomic::Ordering::SeqCst);
    assert!(pid > 0);
    assert!(dies(pid).await, "the background child {pid} still runs");
}

// ---------------------------------------------------------------------------
// list / gc

/// A sandbox-labelled container created behind odek's back with `owner`
/// labels, marked with the setup's launch key as odek marks its own.
async fn stale(s: &Setup, name: &str, owner: BTreeMap<String, String>) -> String {
    let mut labels = owner;
    labels.insert(labels::SANDBOX.into(), "true".into());
    labels.insert(labels::CREATED.into(), "1".into());
    let key = odek_core::secret::Secret::load_or_create(&s.odek_home).expect("launch key");
    labels::sign(&key, name, None, &mut labels);
    let spec = ContainerSpec {
        name: name.into(),
        image: IMAGE.into(),
        cmd: vec!["sleep".into(), "1".into()],
        entrypoint: None,
        cap_add: Vec::new(),
        log_driver: None,
        no_healthcheck: false,
        env: Vec::new(),
        working_dir: "/workspace".into(),
        user: None,
        labels,
        network_mode: "none".into(),
        init: true,
        pids_limit: 4096,
        cap_drop: vec!["ALL".into()],
        security_opt: vec!["no-new-privileges".into()],
        tmpfs: Vec::new(),
        binds: Vec::new(),
        memory_bytes: None,
        nano_cpus: None,
        runtime: None,
        open_stdin: false,
        stdin_once: false,
        auto_remove: false,
        dns: Vec::new(),
        readonly_rootfs: false,
    };
    s.fake.create_container(&spec).await.expect("create").id
}

/// `odek sandbox gc [--detached]` with the setup's `$ODEK_HOME`.
async fn gc(s: &Setup, detached: bool) -> Vec<String> {
    let opts = odek_core::inventory::GcOptions {
        detached,
        ..odek_core::inventory::GcOptions::new(&s.odek_home)
    };
    s.odek.gc(&opts).await.expect("gc")
}

/// Owner labels of a process that does not exist.
fn dead_owner() -> BTreeMap<String, String> {
    let mut l = Owner::current().labels();
    // Above any default pid_max: no such process.
    l.insert(labels::OWNER_PID.into(), "4294967".into());
    l
}

#[tokio::test]
async fn gc_removes_a_sandbox_whose_owner_is_gone_and_keeps_live_ones() {
    let s = Setup::new();
    let live = s.up().await.expect("launch");
    let dead = stale(&s, "odek-deadbeef0000", dead_owner()).await;
    let listed = s.odek.list(&s.odek_home).await.expect("list");
    assert_eq!(listed.len(), 2);
    let d = listed.iter().find(|l| l.id == dead).expect("listed");
    assert_eq!(d.owner_gone, Some(true));
    let l = listed
        .iter()
        .find(|l| Some(&l.id) == live.container_id.as_ref())
        .expect("listed");
    assert_eq!(l.owner_gone, Some(false));
    assert_eq!(l.owner_pid, Some(std::process::id()));

    let removed = gc(&s, false).await;
    assert_eq!(removed, vec!["odek-deadbeef0000".to_string()]);
    assert_eq!(
        s.fake.containers(),
        vec![live.container_id.clone().expect("id")]
    );
}

#[tokio::test]
async fn gc_never_touches_containers_that_are_not_odek_sandboxes() {
    let s = Setup::new();
    add_peer(&s.fake, "shop-redis-1", Some("redis"), SHOP_DEFAULT_ID, &[]).await;
    assert!(gc(&s, true).await.is_empty());
    assert_eq!(s.fake.containers().len(), 1);
}

#[tokio::test]
async fn gc_keeps_detached_sandboxes_unless_asked() {
    let s = Setup::new();
    let plan = s.resolve().await.expect("resolve");
    let opts = odek_core::LaunchOptions {
        detached: true,
        ..Default::default()
    };
    s.odek.launch(&plan, &opts, &s.reporter).await.expect("up");
    assert!(gc(&s, false).await.is_empty());
    assert_eq!(s.fake.containers().len(), 1);
    assert_eq!(gc(&s, true).await.len(), 1);
    assert!(s.fake.containers().is_empty());
}

#[tokio::test]
async fn gc_keeps_a_sandbox_owned_by_another_host() {
    let s = Setup::new();
    let mut owner = dead_owner();
    owner.insert(labels::OWNER_HOST.into(), "some-other-host".into());
    stale(&s, "odek-elsewhere0000", owner).await;
    assert!(gc(&s, false).await.is_empty());
    assert_eq!(s.fake.containers().len(), 1);
}

#[tokio::test]
async fn gc_scopes_to_a_workdir_and_dry_run_removes_nothing() {
    let s = Setup::new();
    let here = s.workdir.display().to_string();
    let there = "/elsewhere/project";
    for (name, wd) in [
        ("odek-here00000000", here.as_str()),
        ("odek-there0000000", there),
    ] {
        let mut owner = dead_owner();
        owner.insert(labels::WORKDIR.into(), wd.into());
        stale(&s, name, owner).await;
    }
    let opts =
        |workdir: Option<std::path::PathBuf>, dry_run: bool| odek_core::inventory::GcOptions {
            workdir,
            dry_run,
            ..odek_core::inventory::GcOptions::new(&s.odek_home)
        };
    let mut would = s
        .odek
        .gc(&opts(None, true))
        .await
        .expect("gc --all --dry-run");
    would.sort();
    assert_eq!(would, ["odek-here00000000", "odek-there0000000"]);
    assert_eq!(s.fake.containers().len(), 2, "a dry run removed something");
    let would_here = s
        .odek
        .gc(&opts(Some(s.workdir.clone()), true))
        .await
        .expect("gc --dry-run");
    assert_eq!(would_here, ["odek-here00000000"]);
    assert_eq!(s.fake.containers().len(), 2, "a dry run removed something");

    let removed = s
        .odek
        .gc(&opts(Some(s.workdir.clone()), false))
        .await
        .expect("gc");
    assert_eq!(removed, ["odek-here00000000"]);
    assert_eq!(s.fake.containers().len(), 1);
    // A workdir that is a prefix or a child of the label does not match.
    for other in ["/elsewhere", "/elsewhere/project/sub"] {
        let none = s
            .odek
            .gc(&opts(Some(other.into()), false))
            .await
            .expect("gc");
        assert!(none.is_empty(), "{other} matched {none:?}");
    }
    assert_eq!(
        s.odek.gc(&opts(None, false)).await.expect("gc --all"),
        ["odek-there0000000"]
    );
    assert!(s.fake.containers().is_empty());
}

/// Stdin or a terminal for a sandbox without odek's supervisor (commands
/// through the exec API) is refused before anything runs, naming the fix;
/// the same request without them runs (positive control).
#[tokio::test]
async fn stdin_or_a_terminal_without_the_supervisor_is_refused_before_anything_runs() {
    use futures_util::StreamExt;
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let sink = |_: StreamKind, _: &[u8]| {};
    let r = req(Command::Argv(vec!["cat".into()]));
    let asks = [
        odek_core::ExecIo {
            stdin: Some(futures_util::stream::iter(vec![b"hi".to_vec()]).boxed()),
            ..Default::default()
        },
        odek_core::ExecIo {
            tty: Some(odek_core::WinSize { cols: 80, rows: 24 }),
            ..Default::default()
        },
    ];
    for io in asks {
        let what = format!("{io:?}");
        let err = s
            .odek
            .exec_io(&sb, &r, &ExecOptions::default(), io, &sink)
            .await
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            matches!(err, odek_core::Error::Exec { started: false, .. }),
            "{what}: {err:?}"
        );
        assert!(text.contains("supervisor"), "{text}");
        assert!(text.contains("ODEK_SUPERVISOR"), "{text}");
        assert!(s.fake.calls_of(Op::Exec).is_empty(), "{what}: an exec ran");
    }
    let plain = s
        .odek
        .exec_io(
            &sb,
            &r,
            &ExecOptions::default(),
            odek_core::ExecIo::default(),
            &sink,
        )
        .await
        .expect("runs");
    assert_eq!(plain.exit_code, 0);
    assert_eq!(s.fake.calls_of(Op::Exec).len(), 1);
}

/// Background processes in a sandbox without odek's supervisor (commands
/// through the exec API) are refused before anything runs, naming the fix:
/// odek implements them in the supervisor only; a foreground exec of the
/// same command runs (positive control).
#[tokio::test]
async fn background_processes_without_the_supervisor_are_refused_before_anything_runs() {
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let containers = s.fake.containers().len();
    let r = req(Command::Argv(vec!["sleep".into(), "300".into()]));
    let err = s.odek.exec_background(&sb, &r).await.expect_err("refused");
    let text = err.to_string();
    assert!(
        matches!(err, odek_core::Error::Exec { started: false, .. }),
        "{err:?}"
    );
    assert!(
        text.contains("background processes need odek's supervisor"),
        "{text}"
    );
    assert!(text.contains("ODEK_SUPERVISOR"), "{text}");
    let id = odek_core::exec::ProcessId("1-1".into());
    for err in [
        s.odek
            .process_output(&sb, &id, None)
            .await
            .expect_err("refused"),
        s.odek.process_kill(&sb, &id).await.expect_err("refused"),
    ] {
        assert!(
            matches!(err, odek_core::Error::Exec { started: false, .. }),
            "{err:?}"
        );
        // Reading or killing one: there is none, and nothing was done.
        let text = err.to_string();
        assert!(
            text.contains("has no background process \"1-1\"") && text.contains("nothing was done"),
            "{text}"
        );
    }
    assert!(s.fake.calls_of(Op::Exec).is_empty(), "an exec ran");
    assert_eq!(
        s.fake.containers().len(),
        containers,
        "a container was made"
    );
    let sink = |_: StreamKind, _: &[u8]| {};
    let ran = s
        .odek
        .exec(&sb, &r, &ExecOptions::default(), &sink)
        .await
        .expect("runs");
    assert_eq!(ran.exit_code, 0);
    assert_eq!(s.fake.calls_of(Op::Exec).len(), 1);
}

/// The file tools in a sandbox without odek's supervisor (commands through
/// the exec API) are refused before anything runs, naming the fix: they
/// run as the command user through the supervisor only, never as the
/// container's user through the exec API.
#[tokio::test]
async fn file_tools_without_the_supervisor_are_refused_before_anything_runs() {
    use odek_core::api::{
        EditFileRequest, FileEdit, ListDirectoryRequest, ReadFileRequest, WriteFileRequest,
    };
    use odek_core::error::FileErrorKind;
    let s = Setup::new();
    let sb = s.up().await.expect("launch");
    let opts = ExecOptions::default();
    let errs = [
        s.odek
            .read_file(
                &sb,
                &ReadFileRequest {
                    path: "a".into(),
                    ..Default::default()
                },
                &opts,
            )
            .await
            .expect_err("refused"),
        s.odek
            .write_file(
                &sb,
                &WriteFileRequest {
                    path: "a".into(),
                    content: "x".into(),
                    ..Default::default()
                },
                &opts,
            )
            .await
            .expect_err("refused"),
        s.odek
            .edit_file(
                &sb,
                &EditFileRequest {
                    path: "a".into(),
                    edits: vec![FileEdit {
                        old_text: "x".into(),
                        new_text: "y".into(),
                    }],
                    ..Default::default()
                },
                &opts,
            )
            .await
            .expect_err("refused"),
        s.odek
            .list_directory(
                &sb,
                &ListDirectoryRequest {
                    path: ".".into(),
                    ..Default::default()
                },
                &opts,
            )
            .await
            .expect_err("refused"),
    ];
    for err in errs {
        match &err {
            odek_core::Error::File(f) => {
                assert_eq!(f.kind, FileErrorKind::NoSupervisor, "{err:?}");
                assert!(f.path.starts_with("/workspace"), "{err:?}");
            }
            other => panic!("not a file refusal: {other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.contains("need odek's supervisor") && text.contains("ODEK_SUPERVISOR="),
            "{text}"
        );
        assert!(text.contains("nothing was done"), "{text}");
        assert_eq!(err.class(), FailureClass::Config);
    }
    assert!(s.fake.calls_of(Op::Exec).is_empty(), "an exec ran");
}

#[tokio::test]
async fn a_pools_first_fill_sweeps_orphans_of_dead_owners_and_keeps_live_ones() {
    // A pool owner killed between a launch's create and attach leaves a
    // created, never-started container; the next pool's first fill sweeps
    // such orphans as gc would.
    let s = Setup::new();
    let live = s.up().await.expect("launch");
    let live_id = live.container_id.clone().expect("id");
    let dead = stale(&s, "odek-deadbeef0001", dead_owner()).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        s.fake.containers().contains(&dead),
        "control: nothing swept it yet"
    );
    let plan = s.resolve().await.expect("resolve");
    let pool = odek_core::pool::Pool::new(s.odek.clone(), 1);
    pool.fill(&plan, None);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.fake.containers().contains(&dead) && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = s.fake.containers();
    assert!(!left.contains(&dead), "the orphan was not swept: {left:?}");
    assert!(
        left.contains(&live_id),
        "a live owner's sandbox was removed: {left:?}"
    );
    pool.drain().await;
}

/// `odek sandbox ls` says which Compose project's networks each sandbox
/// holds (the reason `docker compose down` of it fails while it runs); one
/// on no network holds none.
#[tokio::test]
async fn list_names_the_compose_projects_whose_networks_a_sandbox_holds() {
    let s = Setup::new().compose("shop");
    let attached = s.up().await.expect("launch");
    let listed = s.odek.list(&s.odek_home).await.expect("list");
    let l = listed
        .iter()
        .find(|l| l.name == attached.name)
        .expect("listed");
    assert_eq!(l.compose_projects, vec!["shop".to_string()], "{l:?}");
    assert!(
        l.networks.iter().any(|n| n.starts_with("shop_")),
        "{:?}",
        l.networks
    );

    let s = Setup::new().network_mode("none");
    let offline = s.up().await.expect("launch");
    let listed = s.odek.list(&s.odek_home).await.expect("list");
    let l = listed
        .iter()
        .find(|l| l.name == offline.name)
        .expect("listed");
    assert!(l.compose_projects.is_empty(), "{l:?}");
}
