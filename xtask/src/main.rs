//! odek's task runner: `cargo xtask <recipe>`.
//!
//! Recipes (one line each; `cargo xtask help` prints them):
//! - `setup`    install what a fresh Debian machine lacks (apt), when root
//! - `images`   build the offline test images (tests/images/build.sh)
//! - `demo`     the main job: Compose project `shop<ns>` (this checkout's, printed) + `odek run` reaching redis and postgres
//! - `header`   regenerate ffi/include/odek.h with cbindgen
//! - `header-check` fail when the checked-in header or ABI schemas differ from fresh ones
//! - `schema`   regenerate ffi/schema/*.json, the JSON Schemas of the C ABI's messages
//! - `lint`     fmt --check, clippy -D warnings, shellcheck, no convention/issue citations, every cited test exists, cargo doc -D warnings
//! - `deps`     the module dependency graph of core/src and its cycles (`--tests`: with test modules; `--src DIR`: another tree)
//! - `unit`     unit and fake-engine tests (no Docker needed)
//! - `e2e`      real-Docker end-to-end suite (images, registry, Compose fixture)
//! - `python`   the Python binding's pytest suite (bindings/python/run-tests.sh)
//! - `mcp`      `odek mcp` driven by the official MCP Python SDK (tests/mcp/run-tests.sh)
//! - `go`       the Go binding's go vet + go test -race (bindings/go/run-tests.sh)
//! - `nonroot`  e2e, Python and MCP suites as a normal user in the docker group (tests/nonroot/run.sh)
//! - `c`        the C smoke test: NULL/UTF-8/JSON abuse, valgrind loop, real Docker
//! - `dist`     the release layout: `cargo xtask dist [--prefix DIR] [--no-wheel]` (default target/dist)
//! - `package`  dist, then the wheel and the Go example tested outside the checkout
//! - `nix`      the offline flake check (parse, lock, stub evaluation, digest)
//! - `test`     everything CI runs (README's test command)
//! - `bench`    the performance benchmark against the real engine (not part of `test`)
//! - `session-timings` per-tool wall times of one agent session through `odek mcp` (not part of `test`)
//! - `clean`    remove test containers, networks, images and the registry

mod checks;
mod cited_tests;
mod deps;
mod dist;
mod ns;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

const RECIPES: &[(&str, &str)] = &[
    (
        "setup",
        "install what a fresh Debian machine lacks (apt), when root",
    ),
    (
        "images",
        "build the offline test images (tests/images/build.sh)",
    ),
    (
        "demo",
        "the main job: Compose project `shop<ns>` (this checkout's, printed) + `odek run` reaching redis and postgres",
    ),
    ("header", "regenerate ffi/include/odek.h with cbindgen"),
    (
        "header-check",
        "fail when the checked-in header or ABI schemas differ from fresh ones",
    ),
    (
        "schema",
        "regenerate ffi/schema/*.json, the JSON Schemas of the C ABI's messages",
    ),
    (
        "lint",
        "fmt --check, clippy -D warnings, shellcheck, no convention/issue citations, every cited test exists, cargo doc -D warnings",
    ),
    (
        "deps",
        "the module dependency graph of core/src and its cycles [--tests] [--src DIR]",
    ),
    ("unit", "unit and fake-engine tests (no Docker needed)"),
    (
        "e2e",
        "real-Docker end-to-end suite (images, registry, Compose fixture)",
    ),
    (
        "python",
        "the Python binding's pytest suite (bindings/python/run-tests.sh)",
    ),
    (
        "mcp",
        "`odek mcp` driven by the official MCP Python SDK (tests/mcp/run-tests.sh)",
    ),
    (
        "go",
        "the Go binding's go vet + go test -race (bindings/go/run-tests.sh)",
    ),
    (
        "nonroot",
        "the e2e, Python and MCP suites as a non-root user in the docker group (tests/nonroot/run.sh)",
    ),
    (
        "c",
        "the C smoke test: NULL/UTF-8/JSON abuse, valgrind loop, real Docker",
    ),
    (
        "dist",
        "release layout [--prefix DIR] [--no-wheel]: bin, lib, include, pkgconfig, completions, man, wheel",
    ),
    (
        "package",
        "dist, then the wheel and the Go example tested outside the checkout",
    ),
    (
        "nix",
        "the offline flake check (parse, lock, stub evaluation, digest)",
    ),
    ("test", "everything CI runs (README's test command)"),
    (
        "bench",
        "the performance benchmark (docs/PERFORMANCE.md; not part of test)",
    ),
    (
        "session-timings",
        "per-tool wall times of one agent session through `odek mcp` [--sessions N] [--json FILE] (not part of test)",
    ),
    (
        "clean",
        "remove test containers, networks, images and the registry",
    ),
];

/// Debian packages the tests and the demo need: command → package.
const APT: &[(&str, &str)] = &[
    ("debootstrap", "debootstrap"),
    ("docker-registry", "docker-registry"),
    ("curl", "curl"),
    ("docker-compose", "docker-compose"),
    ("nix-instantiate", "nix-bin"),
    ("go", "golang-go"),
    ("valgrind", "valgrind"),
    ("gcc", "gcc"),
    ("pkg-config", "pkg-config"),
    ("objdump", "binutils"),
    ("shellcheck", "shellcheck"),
    // The second Docker daemon of tests/e2e/src/second_daemon.rs: a mount
    // namespace of its own, its networks' bridges (dockerd itself comes with
    // the Docker the suite needs anyway).
    ("unshare", "util-linux"),
    ("ip", "iproute2"),
    // The ssh:// engine test (tests/e2e/tests/remote_ssh.rs): odek runs the
    // system's ssh; the test runs its own sshd on a namespace's loopback.
    ("ssh", "openssh-client"),
    ("sshd", "openssh-server"),
    // gVisor, registered with the second daemon by
    // tests/e2e/tests/runtime_runsc.rs (odek refuses it, naming why).
    ("runsc", "runsc"),
    // Podman's API service and podman-compose (tests/e2e/tests/podman.rs);
    // catatonit is the init Podman 4.3 always uses, and netavark with
    // aardvark-dns its network stack (without recommends apt would pick
    // the CNI plugins).
    ("podman", "podman"),
    ("podman-compose", "podman-compose"),
    ("catatonit", "catatonit"),
    ("/usr/lib/podman/netavark", "netavark"),
    ("/usr/lib/podman/aardvark-dns", "aardvark-dns"),
];

type R = Result<(), String>;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace")
        .to_path_buf()
}

/// Runs `cmd` (in the workspace root unless it names its own directory).
fn sh(cmd: &mut Command) -> R {
    if cmd.get_current_dir().is_none() {
        cmd.current_dir(root());
    }
    eprintln!("xtask> {cmd:?}");
    let st = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?} failed with {st}"))
    }
}

/// Cargo's target directory: `CARGO_TARGET_DIR` (relative to the workspace
/// root when relative), else `<root>/target`.
fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        Some(d) => root().join(d),
        None => root().join("target"),
    }
}

/// This checkout's test namespace (ns.rs), exported by `main` as `ODEK_TEST_NS`.
pub(crate) fn test_ns() -> String {
    std::env::var(ns::VAR).expect("main exports ODEK_TEST_NS")
}

/// This checkout's test image `odek-test-<ns>/<name>:1`.
pub(crate) fn test_image(name: &str) -> String {
    format!("odek-test-{}/{name}:1", test_ns())
}

/// This checkout's e2e Compose project `odeke2e<ns>`.
pub(crate) fn e2e_project() -> String {
    format!("odeke2e{}", test_ns())
}

fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    // The e2e build script derives the default namespace itself, and cargo
    // rebuilds the e2e crate (and every test linking it) whenever
    // ODEK_TEST_NS changes, from unset to set included: cargo sees it only
    // when it is not the default, as in a plain `cargo test`.
    if std::env::var(ns::VAR).is_ok_and(|v| v == ns::hashed(&root())) {
        cmd.env_remove(ns::VAR);
    }
    cmd
}

fn have(cmd: &str) -> bool {
    Command::new("sh")
        .args([
            "-c",
            &format!("command -v {cmd} >/dev/null 2>&1 || [ -x /usr/sbin/{cmd} ]"),
        ])
        .status()
        .is_ok_and(|s| s.success())
}

/// What the images and the demo need of [`APT`].
const APT_IMAGES: &[(&str, &str)] = &[
    ("debootstrap", "debootstrap"),
    ("docker-compose", "docker-compose"),
];

/// Everything the test command needs.
fn setup() -> R {
    install(APT, true)
}

/// Installs the packages of `tools` whose command is missing (and
/// python3-venv when `venv` and it is missing), with apt when root.
fn install(tools: &[(&str, &str)], venv: bool) -> R {
    let mut missing: Vec<&str> = tools
        .iter()
        .filter(|(c, _)| !have(c))
        .map(|(_, p)| *p)
        .collect();
    let has_venv = || {
        Command::new("python3")
            .args(["-m", "venv", "--help"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if venv && !has_venv() {
        missing.push("python3-venv");
    }
    if missing.is_empty() {
        return Ok(());
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    if !is_root || !have("apt-get") {
        return Err(format!(
            "missing tools; install them first: sudo apt-get install -y {}",
            missing.join(" ")
        ));
    }
    eprintln!("xtask: installing {} (apt)", missing.join(" "));
    sh(Command::new("apt-get").args(["update", "-qq"]))?;
    sh(Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(&missing)
        .env("DEBIAN_FRONTEND", "noninteractive"))
}

fn docker_up() -> R {
    let ok = Command::new("docker")
        .args(["info", "--format", "{{.ServerVersion}}"])
        .output()
        .map_err(|e| format!("docker CLI not found: {e}"))?;
    if !ok.status.success() {
        return Err(format!(
            "the Docker daemon is not reachable (docker info: {}); start it — the e2e suite never skips",
            String::from_utf8_lossy(&ok.stderr).trim()
        ));
    }
    Ok(())
}

/// Builds the static `odek-supervisor` into `static/` of the target
/// directory (`CARGO_TARGET_DIR`, else `target/`) and
/// points `ODEK_SUPERVISOR_BIN` at it for every later step (the
/// supervisor's own tests), unless the caller set it already; and
/// `ODEK_SUPERVISOR` too, unless the caller set it (empty: off), so that
/// every odek the suites run — the CLI, `odek mcp`, libodek under Python,
/// Go and C — has the supervisor, as an installed odek does. The harness
/// names the binary rather than relying on discovery beside
/// `target/debug/odek`: there cargo's own (dynamic) build of
/// `odek-supervisor` lies, which discovery rightly refuses.
pub(crate) fn supervisor() -> R {
    egress()?;
    if let Some(bin) = std::env::var_os("ODEK_SUPERVISOR_BIN") {
        if std::env::var_os("ODEK_SUPERVISOR").is_none() {
            // Single-threaded here: no other thread reads the environment.
            std::env::set_var("ODEK_SUPERVISOR", bin);
        }
        return Ok(());
    }
    let host = host_triple()?;
    let target = target_dir().join("static");
    eprintln!("xtask: building the static odek-supervisor (release; a few minutes the first time)");
    sh(cargo()
        .args([
            "build",
            "--release",
            "-p",
            "odek-supervisor",
            "--bin",
            "odek-supervisor",
            "--target",
            &host,
        ])
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env("CARGO_TARGET_DIR", &target))?;
    let bin = target.join(&host).join("release/odek-supervisor");
    // Single-threaded here: no other thread reads the environment.
    std::env::set_var("ODEK_SUPERVISOR_BIN", &bin);
    if std::env::var_os("ODEK_SUPERVISOR").is_none() {
        std::env::set_var("ODEK_SUPERVISOR", &bin);
    }
    Ok(())
}

/// Builds the static `odek-egress` (the egress proxy, docs/SPEC.md §4.5)
/// into `static/` of the target directory, like the supervisor, and points
/// `ODEK_EGRESS_BIN` at it for every later step (odek mounts it in egress
/// mode), unless the caller set it already.
pub(crate) fn egress() -> R {
    if std::env::var_os("ODEK_EGRESS_BIN").is_some_and(|v| !v.is_empty()) {
        return Ok(());
    }
    let host = host_triple()?;
    let target = target_dir().join("static");
    eprintln!("xtask: building the static odek-egress (release; a few minutes the first time)");
    sh(cargo()
        .args([
            "build",
            "--release",
            "-p",
            "odek-egress",
            "--bin",
            "odek-egress",
            "--target",
            &host,
        ])
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env("CARGO_TARGET_DIR", &target))?;
    // Single-threaded here: no other thread reads the environment.
    std::env::set_var(
        "ODEK_EGRESS_BIN",
        target.join(&host).join("release/odek-egress"),
    );
    Ok(())
}

/// The host's target triple (`rustc -vV`): the static supervisor is built
/// for it explicitly, so that `RUSTFLAGS` reach only the supervisor, not
/// build scripts and proc macros.
pub(crate) fn host_triple() -> Result<String, String> {
    let host = Command::new("rustc")
        .arg("-vV")
        .output()
        .map_err(|e| format!("rustc -vV: {e}"))?;
    String::from_utf8_lossy(&host.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .ok_or_else(|| "rustc -vV names no host triple".to_string())
}

fn images() -> R {
    install(APT_IMAGES, false)?;
    docker_up()?;
    let built = sh(Command::new("bash").arg("tests/images/build.sh"));
    give_back_target();
    built?;
    eprintln!(
        "xtask: this checkout's test images: {} (ODEK_TEST_NS={})",
        ["base", "redis", "postgres", "busybox"]
            .map(test_image)
            .join(", "),
        test_ns()
    );
    Ok(())
}

/// Run through `sudo` (as README says for the image build), cargo and the
/// build wrote the target directory as root: it goes back to the user who
/// ran sudo (`SUDO_UID`/`SUDO_GID`), so their next `cargo xtask …` can
/// write it. Best effort, said when it fails.
fn give_back_target() {
    let (Ok(uid), Ok(gid)) = (std::env::var("SUDO_UID"), std::env::var("SUDO_GID")) else {
        return;
    };
    if uid.parse::<u32>().is_err() || gid.parse::<u32>().is_err() {
        return;
    }
    let dir = target_dir();
    let ok = Command::new("chown")
        .args(["-R", &format!("{uid}:{gid}"), "--"])
        .arg(&dir)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!(
            "xtask: warning: could not give {} back to uid {uid} (run `sudo chown -R {uid}:{gid} {}`)",
            dir.display(),
            dir.display()
        );
    }
}

fn demo() -> R {
    images()?;
    supervisor()?;
    eprintln!("xtask: building odek (a few minutes the first time)");
    sh(cargo().args(["build", "-p", "odek-cli"]))?;
    // This checkout's names (ns.rs): never a user's own project `shop`.
    let project = format!("shop{}", test_ns());
    let image = test_image("base");
    sh(Command::new("bash").args(["tests/fixtures/compose/up.sh", &project]))?;
    let workdir = target_dir().join("demo-project");
    std::fs::create_dir_all(&workdir).map_err(|e| e.to_string())?;
    let odek = target_dir().join("debug/odek");
    eprintln!("\nxtask: the main job, with the Compose project `{project}` —");
    eprintln!("  odek run --sandbox-compose {project} --sandbox-image {image} -- sh -c 'redis-cli -h redis ping && pg_isready -h postgres'\n");
    sh(Command::new(odek).current_dir(&workdir).args([
        "-C",
        &workdir.display().to_string(),
        "run",
        "--sandbox-compose",
        &project,
        "--sandbox-image",
        &image,
        "--",
        "sh",
        "-c",
        "redis-cli -h redis ping && pg_isready -h postgres",
    ]))?;
    eprintln!("\nxtask: the Compose project `{project}` is still up; stop it with tests/fixtures/compose/down.sh {project}");
    Ok(())
}

fn generate_header() -> Result<String, String> {
    let crate_dir = root().join("ffi");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml"))
        .map_err(|e| format!("ffi/cbindgen.toml: {e}"))?;
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .map_err(|e| format!("cbindgen: {e}"))?;
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).map_err(|e| e.to_string())
}

const HEADER: &str = "ffi/include/odek.h";
/// The Go module's copy of the header (it builds outside the checkout).
const GO_HEADER: &str = "bindings/go/include/odek.h";

fn header() -> R {
    let h = generate_header()?;
    for path in [HEADER, GO_HEADER] {
        std::fs::write(root().join(path), &h).map_err(|e| format!("{path}: {e}"))?;
        eprintln!("xtask: wrote {path}");
    }
    Ok(())
}

/// The JSON Schemas of the C ABI's messages (`odek_core::api`), which the
/// bindings' type tests read.
const SCHEMA_DIR: &str = "ffi/schema";

/// Runs core's `api_schema` example: `write` or `check` [`SCHEMA_DIR`].
fn api_schema(mode: &str) -> R {
    let dir = root().join(SCHEMA_DIR);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{SCHEMA_DIR}: {e}"))?;
    sh(cargo()
        .args([
            "run",
            "--quiet",
            "-p",
            "odek-core",
            "--example",
            "api_schema",
            "--",
            mode,
        ])
        .arg(&dir))?;
    eprintln!(
        "xtask: {SCHEMA_DIR}/*.json {}",
        if mode == "write" {
            "written"
        } else {
            "up to date"
        }
    );
    Ok(())
}

fn header_check() -> R {
    api_schema("check")?;
    let fresh = generate_header()?;
    for path in [HEADER, GO_HEADER] {
        let current = std::fs::read_to_string(root().join(path)).unwrap_or_default();
        if fresh == current {
            eprintln!("xtask: {path} is up to date");
        } else {
            let line = fresh
                .lines()
                .zip(current.lines())
                .position(|(a, b)| a != b)
                .map_or_else(|| "its length".to_string(), |i| format!("line {}", i + 1));
            return Err(format!(
                "{path} differs from the generated header (first difference at {line}); run `cargo xtask header` and commit it"
            ));
        }
    }
    Ok(())
}

fn lint() -> R {
    sh(cargo().args(["fmt", "--all", "--", "--check"]))?;
    checks::citations()?;
    cited_tests::check()?;
    checks::shellcheck()?;
    deps::no_cycles()?;
    sh(cargo().args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    checks::doc()
}

/// The C ABI load test needs the real engine: it runs with the e2e tier.
const LOAD_TEST: &str = "many_threads_launch_exec_destroy_on_one_client";

fn unit() -> R {
    // odek-supervisor's own tests run it in containers of the test images.
    images()?;
    supervisor()?;
    sh(cargo().args([
        "test",
        "--workspace",
        "--exclude",
        "odek-e2e",
        "--",
        "--skip",
        LOAD_TEST,
    ]))
}

fn e2e_suite() -> R {
    // The registry test serves an image on loopback; start.sh polls it with curl.
    install(
        &[("docker-registry", "docker-registry"), ("curl", "curl")],
        false,
    )?;
    images()?;
    supervisor()?;
    sh(cargo().args(["build", "-p", "odek-cli"]))?;
    sh(cargo().args([
        "test",
        "-p",
        "odek-e2e",
        "--no-fail-fast",
        "--",
        "--test-threads",
        "4",
    ]))?;
    sh(cargo().args([
        "test", "-p", "odek-ffi", "--test", "load", "--", "--exact", LOAD_TEST,
    ]))
}

fn cleanup() {
    // Leave nothing behind, pass or fail.
    let _ = sh(Command::new("bash").arg("tests/e2e/cleanup.sh"));
}

fn e2e() -> R {
    let result = e2e_suite();
    cleanup();
    result
}

fn script(path: &str) -> R {
    images()?;
    supervisor()?;
    sh(Command::new("bash").arg(path))
}

fn nix() -> R {
    install(&[("nix-instantiate", "nix-bin")], false)?;
    sh(Command::new("bash").arg("nix/check-offline.sh"))?;
    // The check must fail when anything it guards is broken: prove it.
    sh(Command::new("bash").arg("nix/check-offline-selftest.sh"))
}

fn test() -> R {
    type Step = (&'static str, fn() -> R);
    let steps: [Step; 12] = [
        ("setup", setup),
        ("header-check", header_check),
        ("lint", lint),
        ("unit", unit),
        ("e2e", e2e_suite),
        ("python", || script("bindings/python/run-tests.sh")),
        ("mcp", || script("tests/mcp/run-tests.sh")),
        ("go", || script("bindings/go/run-tests.sh")),
        ("nonroot", || script("tests/nonroot/run.sh")),
        ("package", dist::package),
        ("c", || script("ffi/tests/c/run.sh")),
        ("nix", nix),
    ];
    let mut result = Ok(());
    for (name, step) in steps {
        eprintln!("\nxtask test: ==> {name}");
        if let Err(e) = step() {
            result = Err(format!("step {name}: {e}"));
            break;
        }
    }
    cleanup();
    if result.is_ok() {
        eprintln!("\nxtask test: all steps passed");
    }
    result
}

fn clean() -> R {
    let _ = sh(Command::new("bash").arg("tests/e2e/cleanup.sh"));
    sh(Command::new("bash").arg("tests/images/clean.sh"))
}

fn main() -> ExitCode {
    let recipe = std::env::args().nth(1).unwrap_or_else(|| "help".into());
    // One namespace for every step this run starts (still one thread here).
    match ns::namespace(&root()) {
        Ok(ns) => std::env::set_var(ns::VAR, ns),
        Err(e) => {
            eprintln!("xtask {recipe}: {e}");
            return ExitCode::FAILURE;
        }
    }
    let result = match recipe.as_str() {
        "setup" => setup(),
        "images" => images(),
        "demo" => demo(),
        "header" => header(),
        "header-check" => header_check(),
        "schema" => api_schema("write"),
        "lint" => lint(),
        "deps" => deps::deps_cmd(&std::env::args().skip(2).collect::<Vec<_>>()),
        "unit" => unit(),
        "e2e" => e2e(),
        "python" => script("bindings/python/run-tests.sh"),
        "mcp" => script("tests/mcp/run-tests.sh"),
        "go" => script("bindings/go/run-tests.sh"),
        "nonroot" => script("tests/nonroot/run.sh"),
        "c" => script("ffi/tests/c/run.sh"),
        "dist" => dist::dist_cmd(&std::env::args().skip(2).collect::<Vec<_>>()),
        "package" => dist::package(),
        "nix" => nix(),
        "test" => test(),
        "bench" => {
            // What a fresh machine lacks for every phase: the images
            // (debootstrap), the fixture (docker-compose), the Go worker
            // (go, pkg-config), /usr/bin/time, and a venv for the MCP SDK.
            install(
                &[
                    ("/usr/bin/time", "time"),
                    ("debootstrap", "debootstrap"),
                    ("docker-compose", "docker-compose"),
                    ("go", "golang-go"),
                    ("pkg-config", "pkg-config"),
                ],
                true,
            )
            .and_then(|()| script("bench/run.sh"))
        }
        "session-timings" => install(&[], true)
            .and_then(|()| images())
            .and_then(|()| supervisor())
            .and_then(|()| {
                sh(Command::new("bash")
                    .arg("tests/mcp/session-timings.sh")
                    .args(std::env::args().skip(2)))
            }),
        "clean" => clean(),
        _ => {
            eprintln!("usage: cargo xtask <recipe>\n");
            for (r, what) in RECIPES {
                eprintln!("  {r:<16} {what}");
            }
            return if recipe == "help" || recipe == "--help" {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {recipe}: {e}");
            ExitCode::FAILURE
        }
    }
}
