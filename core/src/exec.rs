//! Running commands in a sandbox (SPEC §10.1 exec): argv or a shell string,
//! extra env, optional timeout; output streamed; the exit code passed through.
//! In fallback/off mode the command runs on the host (the plan says so).

use std::io::ErrorKind;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use crate::engine::{ExecSpec, OutputSink, StreamKind};
use crate::error::{Error, FailureClass, Result, Step};
use crate::launch::Sandbox;
use crate::resolve::Odek;

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Command {
    /// An argv, run as is (no shell).
    Argv(Vec<String>),
    /// A string run by `/bin/sh -c`.
    Shell(String),
}

impl Command {
    fn argv(&self) -> Vec<String> {
        match self {
            Command::Argv(v) => v.clone(),
            Command::Shell(s) => vec!["/bin/sh".into(), "-c".into(), s.clone()],
        }
    }
}

/// An exec request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecRequest {
    /// The command.
    pub command: Command,
    /// Extra `KEY=value` pairs for this command (values never logged).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Give up waiting after this long. The command is then abandoned: it
    /// keeps running until the sandbox is destroyed (the Engine API cannot
    /// signal an exec).
    #[serde(default, with = "opt_secs")]
    pub timeout: Option<Duration>,
    /// Working directory (default `/workspace`, or the host workdir).
    #[serde(default)]
    pub workdir: Option<String>,
}

mod opt_secs {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let v: Option<f64> = Option::deserialize(d)?;
        match v {
            None => Ok(None),
            Some(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
            Some(_) => Err(serde::de::Error::custom(
                "timeout must be a positive number of seconds",
            )),
        }
    }
}

/// The outcome of an exec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecOutcome {
    /// The command's exit code (124 after a timeout; 128+N when killed by
    /// signal N on the host).
    pub exit_code: i64,
    /// True when the timeout elapsed first.
    pub timed_out: bool,
}

/// Exit code reported after a timeout (as `timeout(1)`).
pub const TIMEOUT_EXIT: i64 = 124;

fn validate(req: &ExecRequest) -> Result<()> {
    let argv = req.command.argv();
    if argv.is_empty() || argv[0].is_empty() {
        return Err(Error::Usage(
            "exec needs a command (the argv was empty, or its first element was the empty string)"
                .into(),
        ));
    }
    if argv.iter().any(|a| a.contains('\0')) {
        return Err(Error::Usage(
            "exec arguments must not contain NUL bytes".into(),
        ));
    }
    for (k, v) in &req.env {
        crate::config::validate_env_key("exec env", k).map_err(Error::Config)?;
        if v.contains('\0') {
            return Err(Error::Usage(format!("exec env {k} contains a NUL byte")));
        }
    }
    Ok(())
}

impl Odek {
    /// Runs a command in the sandbox, streaming output to `output`.
    ///
    /// Errors: an empty command or NUL bytes (config); the container gone or
    /// stopped during the command (docker-rejected); the daemon lost
    /// (daemon-unreachable). A non-zero exit is not an error.
    pub async fn exec(
        &self,
        sandbox: &Sandbox,
        req: &ExecRequest,
        output: OutputSink<'_>,
    ) -> Result<ExecOutcome> {
        validate(req)?;
        let Some(id) = &sandbox.container_id else {
            return exec_on_host(sandbox, req, output).await;
        };
        let engine = self.engine()?;
        let endpoint = engine.endpoint().to_string();
        let mut env: Vec<String> = req.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        env.sort();
        let spec = ExecSpec {
            cmd: req.command.argv(),
            env,
            working_dir: Some(req.workdir.clone().unwrap_or_else(|| "/workspace".into())),
            user: None,
        };
        let run = engine.exec(id, &spec, output);
        let exit = match req.timeout {
            None => run.await,
            Some(t) => match tokio::time::timeout(t, run).await {
                Ok(r) => r,
                Err(_) => {
                    return Ok(ExecOutcome {
                        exit_code: TIMEOUT_EXIT,
                        timed_out: true,
                    })
                }
            },
        };
        let exit = exit.map_err(|e| match Error::engine(&endpoint, Step::Exec, e, false) {
            Error::Rejected { message, .. } => Error::Exec {
                message: format!(
                    "the command could not run in sandbox {}: {message}",
                    sandbox.name
                ),
                class: FailureClass::DockerRejected,
                started: false,
            },
            other => other,
        })?;
        match exit.code {
            // 137 = SIGKILL: maybe the whole sandbox was killed (docker kill,
            // OOM). Tell the two apart; the engine may report the container's
            // exit a moment after the exec's, so look a few times.
            Some(137) if !still_running(engine.as_ref(), id).await => Err(Error::SandboxStopped {
                message: format!(
                    "sandbox {} stopped while the command ran (killed or out of memory; the command exited 137); the command may have partly run and was not retried",
                    sandbox.name
                ),
            }),
            Some(code) => Ok(ExecOutcome {
                exit_code: code,
                timed_out: false,
            }),
            None => {
                let running = container_running(engine.as_ref(), id).await;
                if running {
                    Err(Error::Exec {
                        message: format!(
                            "the command in sandbox {} ended without an exit code",
                            sandbox.name
                        ),
                        class: FailureClass::DockerRejected,
                        started: true,
                    })
                } else {
                    Err(Error::SandboxStopped {
                        message: format!(
                            "sandbox {} stopped while the command ran (killed or out of memory); the command may have partly run and was not retried",
                            sandbox.name
                        ),
                    })
                }
            }
        }
    }
}

/// True when the container still runs 200 ms after a SIGKILLed command.
async fn still_running(engine: &dyn crate::engine::DockerApi, id: &str) -> bool {
    for _ in 0..4 {
        if !container_running(engine, id).await {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    container_running(engine, id).await
}

/// True when the container still runs (false when gone or unreadable).
async fn container_running(engine: &dyn crate::engine::DockerApi, id: &str) -> bool {
    engine
        .inspect_container(id)
        .await
        .ok()
        .flatten()
        .is_some_and(|c| c.running)
}

/// Fallback / off: runs on the host in the working directory.
async fn exec_on_host(
    sandbox: &Sandbox,
    req: &ExecRequest,
    output: OutputSink<'_>,
) -> Result<ExecOutcome> {
    let argv = req.command.argv();
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(
            req.workdir
                .clone()
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|| sandbox.plan.workdir.clone()),
        )
        .envs(req.env.iter().map(|(k, v)| (k.clone(), v.clone())))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        // As a shell would: 127 for a command that does not exist, 126 for
        // one that cannot be executed (and `docker exec` does the same).
        // ENOEXEC (8): not a format the kernel can execute.
        Err(e)
            if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::PermissionDenied)
                || e.raw_os_error() == Some(8) =>
        {
            let code = if e.kind() == ErrorKind::NotFound {
                127
            } else {
                126
            };
            let msg = format!("odek: cannot run {:?} on the host: {e}\n", argv[0]);
            output(StreamKind::Stderr, msg.as_bytes());
            return Ok(ExecOutcome {
                exit_code: code,
                timed_out: false,
            });
        }
        Err(e) => {
            return Err(Error::Exec {
                message: format!("cannot run {:?} on the host: {e}", argv[0]),
                class: FailureClass::Config,
                started: false,
            })
        }
    };
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let pump = async {
        let mut b1 = vec![0u8; 8192];
        let mut b2 = vec![0u8; 8192];
        loop {
            tokio::select! {
                n = async { match out.as_mut() { Some(o) => o.read(&mut b1).await, None => std::future::pending().await } } => {
                    match n { Ok(0) | Err(_) => out = None, Ok(n) => output(StreamKind::Stdout, &b1[..n]) }
                }
                n = async { match err.as_mut() { Some(e) => e.read(&mut b2).await, None => std::future::pending().await } } => {
                    match n { Ok(0) | Err(_) => err = None, Ok(n) => output(StreamKind::Stderr, &b2[..n]) }
                }
                else => break,
            }
            if out.is_none() && err.is_none() {
                break;
            }
        }
        child.wait().await
    };
    let status = match req.timeout {
        None => pump.await,
        Some(t) => match tokio::time::timeout(t, pump).await {
            Ok(s) => s,
            Err(_) => {
                return Ok(ExecOutcome {
                    exit_code: TIMEOUT_EXIT,
                    timed_out: true,
                })
            }
        },
    };
    let status = status.map_err(|e| Error::Exec {
        message: format!("waiting for the host command failed: {e}"),
        class: FailureClass::Config,
        started: true,
    })?;
    use std::os::unix::process::ExitStatusExt;
    let code = status
        .code()
        .map(i64::from)
        .or_else(|| status.signal().map(|s| 128 + i64::from(s)))
        .unwrap_or(1);
    Ok(ExecOutcome {
        exit_code: code,
        timed_out: false,
    })
}
