//! Child processes: the `docker` CLI baseline and the binding workers.
//!
//! Every child runs in its own process group, so a Ctrl-C at the terminal
//! reaches only the bench, which then finishes cleanup in order (workers are
//! told to destroy their sandboxes; nothing is killed mid-create).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Runs `docker ARGS…` to completion; stdout on success.
pub async fn docker(args: &[&str]) -> Result<String> {
    let out = Command::new("docker")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .output()
        .await
        .context("running docker")?;
    if !out.status.success() {
        bail!(
            "docker {} failed ({}): {}",
            args.first().copied().unwrap_or(""),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs a script or program to completion, its output passed through to our
/// stderr (progress of compose up/down, go build).
pub async fn run_passthrough(cmd: &mut Command, what: &str) -> Result<()> {
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .process_group(0)
        .status()
        .await
        .with_context(|| format!("running {what}"))?;
    if !status.success() {
        bail!("{what} failed ({status})");
    }
    Ok(())
}

/// A binding worker (bench/python/exec_bench.py or bench/go): launches one
/// sandbox through the binding, then times `exec(["true"])` in-process on
/// each `exec` line and answers the nanoseconds.
pub struct Worker {
    pub name: &'static str,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    /// The sandbox's container name, from the worker's `ready` line.
    pub sandbox: String,
}

impl Worker {
    pub async fn spawn(
        name: &'static str,
        mut cmd: Command,
        ready_within: Duration,
    ) -> Result<Worker> {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the {name} worker"))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("worker stdout")?;
        let mut w = Worker {
            name,
            child,
            stdin,
            lines: BufReader::new(stdout).lines(),
            sandbox: String::new(),
        };
        let line = tokio::time::timeout(ready_within, w.lines.next_line())
            .await
            .with_context(|| format!("the {name} worker did not get ready in time"))??
            .with_context(|| format!("the {name} worker exited before it was ready"))?;
        let mut parts = line.split_whitespace();
        match (parts.next(), parts.next()) {
            (Some("ready"), Some(sandbox)) => w.sandbox = sandbox.to_string(),
            _ => bail!("the {name} worker said {line:?} instead of ready"),
        }
        Ok(w)
    }

    async fn send(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().context("worker stdin closed")?;
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    /// One timed exec, as measured inside the worker.
    pub async fn exec(&mut self) -> Result<Duration> {
        self.send("exec").await?;
        let line = tokio::time::timeout(Duration::from_secs(60), self.lines.next_line())
            .await
            .context("worker exec timed out")??
            .context("worker exited")?;
        let ns: u64 = line
            .trim()
            .parse()
            .with_context(|| format!("the {} worker answered {line:?}", self.name))?;
        Ok(Duration::from_nanos(ns))
    }

    /// `n` timed execs run back to back inside the worker, each after
    /// `idle` of sleep there (zero: none), as measured inside the worker.
    pub async fn exec_loop(&mut self, n: usize, idle: Duration) -> Result<Vec<Duration>> {
        self.send(&format!("loop {n} {}", idle.as_millis())).await?;
        let line = tokio::time::timeout(
            Duration::from_secs(60) + idle * n as u32,
            self.lines.next_line(),
        )
        .await
        .context("worker loop timed out")??
        .context("worker exited")?;
        let times = line
            .split_whitespace()
            .map(|t| t.parse::<u64>().map(Duration::from_nanos))
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("the {} worker answered {line:?}", self.name))?;
        if times.len() != n {
            bail!(
                "the {} worker answered {} times for {n} calls: {line:?}",
                self.name,
                times.len()
            );
        }
        Ok(times)
    }

    /// Asks the worker to destroy its sandbox and exit; kills it if it does
    /// not within `within`.
    pub async fn quit(mut self, within: Duration) -> Result<()> {
        let _ = self.send("quit").await;
        self.stdin = None;
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(s)) if s.success() => Ok(()),
            Ok(Ok(s)) => bail!("the {} worker exited with {s}", self.name),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => {
                let _ = self.child.kill().await;
                bail!("the {} worker did not exit; killed", self.name)
            }
        }
    }
}

/// The Go worker, built with the release libodek through a generated
/// pkg-config file (the binding's default build links by `pkg-config odek`),
/// so it links the same library the Python worker loads.
pub async fn build_go_worker(
    repo: &Path,
    target: &Path,
    out_dir: &Path,
    go: &str,
) -> Result<std::path::PathBuf> {
    let pc_dir = out_dir.join("pkgconfig");
    std::fs::create_dir_all(&pc_dir)?;
    let lib = target.join("release");
    let inc = repo.join("ffi/include");
    std::fs::write(
        pc_dir.join("odek.pc"),
        format!(
            "Name: odek\nDescription: odek C ABI (release build, for odek-bench)\nVersion: {}\n\
             Libs: -L{lib} -Wl,-rpath,{lib} -lodek\nCflags: -I{inc}\n",
            odek_core::VERSION,
            lib = lib.display(),
            inc = inc.display()
        ),
    )?;
    let bin = out_dir.join("odek-bench-go");
    let mut cmd = Command::new(go);
    cmd.current_dir(repo.join("bench/go"))
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .env("PKG_CONFIG_PATH", &pc_dir)
        .env("GO111MODULE", "on")
        .env("CGO_ENABLED", "1")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=mod")
        .env("GOTOOLCHAIN", "local");
    if std::env::var_os("GOCACHE").is_none() {
        cmd.env("GOCACHE", target.join("go-cache"));
    }
    if std::env::var_os("GOPATH").is_none() {
        cmd.env("GOPATH", target.join("gopath"));
    }
    if !which(go) {
        bail!(
            "the Go toolchain `{go}` was not found (on PATH: {}): install it (apt-get install golang-go; \
             `cargo xtask bench` does), pass --go PATH, or --skip-bindings",
            std::env::var("PATH").unwrap_or_default()
        );
    }
    run_passthrough(&mut cmd, "go build (bench/go)").await?;
    Ok(bin)
}

/// True when `prog` names an executable file: a path as given, a bare name
/// looked up on PATH.
fn which(prog: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let exec = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if prog.contains('/') {
        return exec(Path::new(prog));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| exec(&d.join(prog))))
}
