//! The release layout and its test, outside the checkout.
//!
//! - `cargo xtask dist [--prefix DIR] [--no-wheel]`: release builds of
//!   odek-cli and odek-ffi, installed as a prefix (default `target/dist`):
//!   `bin/odek`, `lib/libodek.{so,a}`, `lib/pkgconfig/odek{,-static}.pc`
//!   (relocatable: `${pcfiledir}`), `include/odek.h`, completions for bash,
//!   zsh and fish, man pages, the Go module source (`share/odek/go`) and the
//!   Python wheel (`share/odek/python`, built by `pip wheel ./bindings/python`
//!   from the same release build through `CARGO_TARGET_DIR`).
//! - `cargo xtask package`: `dist`, then README's recipes from a temporary
//!   directory outside the checkout: the wheel's platform tag against the
//!   glibc symbol versions its library needs (objdump -T), the wheel in a
//!   fresh venv (ODEK_LIB unset) running the binding's fake-engine, header,
//!   async and real-Docker launch+exec tests, `pip install ./bindings/python`
//!   in another venv, and the Go example built by pkg-config against the
//!   prefix from a copy of the module (shared, and `-tags odek_static`), run
//!   against the Compose fixture.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::{cargo, e2e_project, root, sh, target_dir, test_image, R};

/// Where `dist` installs by default.
pub(crate) fn default_prefix() -> PathBuf {
    target_dir().join("dist")
}

/// `cargo xtask dist [--prefix DIR] [--no-wheel]`.
pub(crate) fn dist_cmd(args: &[String]) -> R {
    let mut prefix = default_prefix();
    let mut wheel = true;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--prefix" => {
                let p = it.next().ok_or("--prefix needs a directory")?;
                prefix = std::env::current_dir().map_err(|e| e.to_string())?.join(p);
            }
            s if s.starts_with("--prefix=") => {
                prefix = std::env::current_dir()
                    .map_err(|e| e.to_string())?
                    .join(&s["--prefix=".len()..]);
            }
            "--no-wheel" => wheel = false,
            other => {
                return Err(format!(
                    "dist: unknown argument {other:?} (usage: cargo xtask dist [--prefix DIR] [--no-wheel])"
                ))
            }
        }
    }
    dist(&prefix, wheel)
}

fn io<T>(what: &Path, r: std::io::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{}: {e}", what.display()))
}

fn copy(from: &Path, to: &Path, mode: u32) -> R {
    use std::os::unix::fs::PermissionsExt as _;
    io(
        to,
        std::fs::create_dir_all(to.parent().expect("a file in a directory")),
    )?;
    // Replace rather than overwrite: a running program may map the old file.
    let tmp = to.with_extension("xtask-tmp");
    io(from, std::fs::copy(from, &tmp))?;
    io(
        &tmp,
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)),
    )?;
    io(to, std::fs::rename(&tmp, to))
}

fn copy_tree(from: &Path, to: &Path) -> R {
    for entry in io(from, std::fs::read_dir(from))? {
        let entry = io(from, entry)?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if io(&src, entry.file_type())?.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            copy(&src, &dst, 0o644)?;
        }
    }
    Ok(())
}

/// Runs `cmd` and returns its stdout (stderr passes through).
fn output(cmd: &mut Command) -> Result<Vec<u8>, String> {
    eprintln!("xtask> {cmd:?}");
    let out = cmd
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        Err(format!("{cmd:?} failed with {}", out.status))
    }
}

/// The pkg-config files, from the templates in ffi/ (one source, also used
/// by nix/libodek.nix).
fn pkgconfig(prefix: &Path) -> R {
    for name in ["odek", "odek-static"] {
        let tpl = root().join(format!("ffi/{name}.pc.in"));
        let text = io(&tpl, std::fs::read_to_string(&tpl))?
            .replace("@VERSION@", env!("CARGO_PKG_VERSION"));
        let dst = prefix.join(format!("lib/pkgconfig/{name}.pc"));
        io(&dst, std::fs::create_dir_all(dst.parent().expect("dir")))?;
        io(&dst, std::fs::write(&dst, text))?;
    }
    Ok(())
}

/// A venv for building wheels (kept in the target directory, made once).
fn build_venv() -> Result<PathBuf, String> {
    let venv = target_dir().join("pip-build-venv");
    if !venv.join("bin/python").is_file() {
        sh(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    Ok(venv)
}

/// Builds the wheel with the package's own backend into `out` (removing older
/// odek wheels there) and returns its path.
fn wheel(out: &Path) -> Result<PathBuf, String> {
    io(out, std::fs::create_dir_all(out))?;
    for e in io(out, std::fs::read_dir(out))?.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with("odek-") && n.ends_with(".whl") {
            io(&e.path(), std::fs::remove_file(e.path()))?;
        }
    }
    let venv = build_venv()?;
    sh(Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "wheel", "--no-deps", "--quiet", "-w"])
        .arg(out)
        .arg(root().join("bindings/python"))
        .env("CARGO_TARGET_DIR", target_dir())
        .env_remove("ODEK_PREBUILT_LIBODEK"))?;
    let wheels: Vec<PathBuf> = io(out, std::fs::read_dir(out))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [w] => Ok(w.clone()),
        _ => Err(format!(
            "expected one wheel in {}, found {wheels:?}",
            out.display()
        )),
    }
}

/// `cargo xtask dist`.
pub(crate) fn dist(prefix: &Path, with_wheel: bool) -> R {
    let t0 = Instant::now();
    // Two invocations, not one: with both packages selected, cargo unifies
    // their dependencies' features and odek-ffi becomes a different unit
    // from the one `pip wheel ./bindings/python` builds alone — each would
    // then rebuild (and overwrite) the other's libodek.so.
    // No `--features testing`: the release library carries neither the fake
    // engine nor odek_debug_panic (checked below).
    sh(cargo().args(["build", "--release", "-p", "odek-ffi"]))?;
    sh(cargo().args(["build", "--release", "-p", "odek-cli"]))?;
    let rel = target_dir().join("release");
    no_test_exports(&rel.join("libodek.so"), &rel.join("libodek.a"))?;
    copy(&rel.join("odek"), &prefix.join("bin/odek"), 0o755)?;
    // The supervisor where the installed odek finds it
    // (`<bin>/../libexec/odek/odek-supervisor`); the wheel carries the same
    // binary beside its libodek.so (bindings/python/setup.py reads
    // ODEK_SUPERVISOR_BIN).
    crate::supervisor()?;
    let sup = std::env::var_os("ODEK_SUPERVISOR_BIN").ok_or("no static odek-supervisor built")?;
    copy(
        Path::new(&sup),
        &prefix.join("libexec/odek/odek-supervisor"),
        0o755,
    )?;
    // The egress proxy beside it (docs/SPEC.md §4.5), found the same way.
    let egress = std::env::var_os("ODEK_EGRESS_BIN").ok_or("no static odek-egress built")?;
    copy(
        Path::new(&egress),
        &prefix.join("libexec/odek/odek-egress"),
        0o755,
    )?;
    copy(
        &rel.join("libodek.so"),
        &prefix.join("lib/libodek.so"),
        0o755,
    )?;
    copy(&rel.join("libodek.a"), &prefix.join("lib/libodek.a"), 0o644)?;
    copy(
        &root().join(crate::HEADER),
        &prefix.join("include/odek.h"),
        0o644,
    )?;
    pkgconfig(prefix)?;

    let odek = prefix.join("bin/odek");
    for (shell, file) in [
        ("bash", "share/bash-completion/completions/odek"),
        ("zsh", "share/zsh/site-functions/_odek"),
        ("fish", "share/fish/vendor_completions.d/odek.fish"),
    ] {
        let script = output(Command::new(&odek).args(["completions", shell]))?;
        let dst = prefix.join(file);
        io(&dst, std::fs::create_dir_all(dst.parent().expect("dir")))?;
        io(&dst, std::fs::write(&dst, script))?;
    }
    sh(Command::new(&odek)
        .arg("manpage")
        .arg(prefix.join("share/man/man1")))?;

    let go = prefix.join("share/odek/go");
    if go.exists() {
        io(&go, std::fs::remove_dir_all(&go))?;
    }
    copy_tree(&root().join("bindings/go"), &go)?;

    if with_wheel {
        let w = wheel(&prefix.join("share/odek/python"))?;
        let size = std::fs::metadata(&w).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "xtask dist: wheel {} ({} bytes)",
            w.file_name().unwrap_or_default().to_string_lossy(),
            size
        );
    }
    eprintln!(
        "xtask dist: installed into {} in {:.0?}",
        prefix.display(),
        t0.elapsed()
    );
    Ok(())
}

/// Names a release build must not carry: the test hook and the fake engine
/// (cargo feature `testing` of odek-ffi and odek-core).
const TEST_NAMES: [&str; 2] = ["odek_debug_panic", "FakeEngine"];

/// The release libraries carry no test code: `nm -D` of libodek.so lists no
/// `odek_debug_panic`, and neither file holds the name of the test hook or
/// of the fake engine anywhere (a byte search: the staticlib's objects are
/// LLVM bitcode under LTO, which nm cannot list, but their symbol names are
/// in it as text).
pub(crate) fn no_test_exports(so: &Path, a: &Path) -> R {
    let dynamic = output(Command::new("nm").args(["-D", "--defined-only"]).arg(so))?;
    let dynamic = String::from_utf8_lossy(&dynamic);
    if !dynamic.contains("odek_client_new") {
        return Err(format!(
            "nm -D {} lists no odek_client_new: not libodek?",
            so.display()
        ));
    }
    let mut found: Vec<String> = dynamic
        .lines()
        .filter(|l| l.contains("odek_debug_panic"))
        .map(|l| format!("{}: exports {}", so.display(), l.trim()))
        .collect();
    for lib in [so, a] {
        let bytes = io(lib, std::fs::read(lib))?;
        for name in TEST_NAMES {
            if bytes.windows(name.len()).any(|w| w == name.as_bytes()) {
                found.push(format!("{} holds {name}", lib.display()));
            }
        }
    }
    if !found.is_empty() {
        return Err(format!(
            "the release libodek carries test code (built with --features testing?): {}",
            found.join("; ")
        ));
    }
    eprintln!(
        "xtask dist: {} and {} carry neither odek_debug_panic nor the fake engine",
        so.display(),
        a.display()
    );
    Ok(())
}

/// The highest `GLIBC_2.N` symbol version a library needs, by `objdump -T`
/// (a different reader than the one that tagged the wheel).
fn glibc_minor_needed(lib: &Path) -> Result<u32, String> {
    let out = output(Command::new("objdump").arg("-T").arg(lib))?;
    let text = String::from_utf8_lossy(&out);
    let mut best = None;
    for word in text.split(|c: char| c.is_whitespace() || c == '(' || c == ')') {
        if let Some(v) = word.strip_prefix("GLIBC_2.") {
            let minor: String = v.chars().take_while(char::is_ascii_digit).collect();
            if let Ok(m) = minor.parse::<u32>() {
                best = best.max(Some(m));
            }
        }
    }
    best.ok_or_else(|| format!("objdump -T {} shows no GLIBC_2.* symbol", lib.display()))
}

/// The wheel's tag against the glibc its library needs, and its contents.
fn check_wheel(wheel: &Path, prefix: &Path, tmp: &Path) -> R {
    let name = wheel
        .file_name()
        .expect("a file")
        .to_string_lossy()
        .into_owned();
    let unpacked = tmp.join("wheel");
    sh(Command::new("python3")
        .args(["-m", "zipfile", "-e"])
        .arg(wheel)
        .arg(&unpacked))?;
    for f in [
        "odek/__init__.py",
        "odek/py.typed",
        "odek/libodek.so",
        "odek/odek-supervisor",
    ] {
        if !unpacked.join(f).is_file() {
            return Err(format!("{name} lacks {f}"));
        }
    }
    let lib = unpacked.join("odek/libodek.so");
    let minor = glibc_minor_needed(&lib)?;
    let arch = std::env::consts::ARCH;
    let want = format!("-py3-none-manylinux_2_{minor}_{arch}.whl");
    if !name.ends_with(&want) {
        return Err(format!(
            "{name}: its libodek.so needs GLIBC_2.{minor} (objdump -T), so the tag must end in {want}"
        ));
    }
    // One release build: the wheel's library is the prefix's.
    let a = io(&lib, std::fs::read(&lib))?;
    let b = io(prefix, std::fs::read(prefix.join("lib/libodek.so")))?;
    if a != b {
        return Err(format!(
            "{name}'s libodek.so differs from {}/lib/libodek.so: not one release build",
            prefix.display()
        ));
    }
    // The supervisor beside libodek.so, where libodek looks for it: the
    // static binary the prefix installs.
    let sup = unpacked.join("odek/odek-supervisor");
    let a = io(&sup, std::fs::read(&sup))?;
    let b = io(
        prefix,
        std::fs::read(prefix.join("libexec/odek/odek-supervisor")),
    )?;
    if a != b {
        return Err(format!(
            "{name}'s odek-supervisor differs from {}/libexec/odek/odek-supervisor",
            prefix.display()
        ));
    }
    // The CLI as a script (pip puts it on PATH) and the supervisor as data
    // in <prefix>/libexec/odek, where that CLI looks for it.
    let data = unpacked.join(format!("odek-{}.data", env!("CARGO_PKG_VERSION")));
    for f in ["scripts/odek", "data/libexec/odek/odek-supervisor"] {
        if !data.join(f).is_file() {
            return Err(format!("{name} lacks {}", data.join(f).display()));
        }
    }
    let a = io(
        &data,
        std::fs::read(data.join("data/libexec/odek/odek-supervisor")),
    )?;
    if a != b {
        return Err(format!(
            "{name}'s libexec/odek/odek-supervisor differs from {}/libexec/odek/odek-supervisor",
            prefix.display()
        ));
    }
    eprintln!("xtask package: {name} is tagged for glibc >= 2.{minor} on {arch}, as objdump -T says its library needs");
    Ok(())
}

/// `py` run in `dir` with neither ODEK_LIB nor PYTHONPATH: the installed
/// package must stand on its own.
fn python_env(py: &Path, dir: &Path) -> Command {
    let mut cmd = Command::new(py);
    cmd.current_dir(dir)
        .env_remove("ODEK_LIB")
        .env_remove("PYTHONPATH")
        .env_remove("CARGO_TARGET_DIR");
    cmd
}

/// The binding's tests that run against the installed wheel: everything but
/// the real-Docker tier, plus the real-Docker launch+exec flows (sync and
/// async). Deselected: the source-tree fallback (not an installed layout)
/// and the example runs (they run the checkout's example with its package).
/// (`-k` matches names and markers: `docker` is the real-Docker marker.)
/// The fake-engine tests (marker `fake`) need a test build of libodek (cargo
/// feature `testing`): the release wheel has no fake engine, and
/// `test_library_exports_no_undeclared_odek_symbol` checks that it refuses it.
const WHEEL_TESTS: &str =
    "(not docker or test_agent_flow or test_module_launch_with_default_client \
     or test_async_real_docker) and not fake and not test_development_fallback \
     and not agent_loop_example";

fn python_wheel(wheel: &Path, tmp: &Path) -> R {
    let venv = tmp.join("venv");
    sh(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    let py = venv.join("bin/python");
    sh(python_env(&py, tmp)
        .args(["-m", "pip", "install", "--quiet"])
        .arg(wheel)
        .arg("pytest>=7"))?;
    // The installed package loads its own library (ODEK_LIB is unset).
    sh(python_env(&py, tmp).args([
        "-c",
        "import odek, pathlib, sys\n\
         pkg = pathlib.Path(odek.__file__).resolve().parent\n\
         lib = odek.library_path().resolve()\n\
         assert 'site-packages' in pkg.parts, pkg\n\
         assert lib == pkg / 'libodek.so', (lib, pkg)\n\
         assert (pkg / 'py.typed').is_file()\n\
         assert (pkg / 'odek-supervisor').is_file()\n\
         print('odek', odek.version(), 'from', lib)",
    ]))?;
    installed_cli(&venv, tmp, "the wheel")?;
    // Typed (py.typed): the installed package passes mypy --strict.
    sh(python_env(&py, tmp).args(["-m", "pip", "install", "--quiet", "mypy"]))?;
    sh(python_env(&py, tmp).args(["-m", "mypy", "--strict", "-p", "odek"]))?;
    let tests = tmp.join("pytests");
    copy_tree(&root().join("bindings/python/tests"), &tests)?;
    sh(python_env(&py, tmp)
        .args([
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "-k",
            WHEEL_TESTS,
        ])
        .arg("--rootdir")
        .arg(&tests)
        .arg(&tests)
        .env("ODEK_TEST_REPO", root())
        // The installed library finds the supervisor beside itself.
        .env_remove("ODEK_SUPERVISOR"))
}

/// The `odek` a pip install put in `venv/bin` is on PATH and runs a
/// sandbox with its supervisor (found in `venv/libexec/odek`), from a
/// directory outside the checkout, with a PATH of the venv and the system
/// only.
fn installed_cli(venv: &Path, tmp: &Path, what: &str) -> R {
    let path = format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        venv.join("bin").display()
    );
    let work = tmp.join(format!("cli-{}", what.replace(' ', "-")));
    io(&work, std::fs::create_dir_all(&work))?;
    let out = Command::new("sh")
        .args([
            "-c",
            &format!("command -v odek && odek --version && odek run --sandbox --sandbox-image {} -- sh -c 'echo in-sandbox'", test_image("base")),
        ])
        .current_dir(&work)
        .env("PATH", &path)
        .env_remove("ODEK_SUPERVISOR")
        .env_remove("ODEK_LIB")
        .env_remove("CARGO_TARGET_DIR")
        .output()
        .map_err(|e| format!("running the odek {what} installed: {e}"))?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let want_bin = venv.join("bin/odek");
    if !out.status.success()
        || stdout.lines().next() != Some(&*want_bin.to_string_lossy())
        || !stdout.contains("in-sandbox")
        || !stderr.contains("supervisor=on")
    {
        return Err(format!(
            "the odek {what} installed ({}) did not run a supervised sandbox from PATH: {}\nstdout: {stdout}\nstderr: {stderr}",
            want_bin.display(),
            out.status
        ));
    }
    eprintln!(
        "xtask package: `odek` from {what} is on PATH and runs a sandbox with its supervisor"
    );
    Ok(())
}

/// README's fresh-clone recipe: `pip install ./bindings/python` in a venv.
fn python_source_install(tmp: &Path) -> R {
    let venv = tmp.join("venv-src");
    sh(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    let py = venv.join("bin/python");
    sh(python_env(&py, &root())
        .args(["-m", "pip", "install", "--quiet", "./bindings/python"])
        .env("CARGO_TARGET_DIR", target_dir()))?;
    sh(python_env(&py, tmp).args([
        "-c",
        "import asyncio, os, tempfile, odek\n\
         d = os.path.realpath(tempfile.mkdtemp())\n\
         async def main():\n\
         \x20   async with odek.AsyncClient() as c:\n\
         \x20       async with odek.launch_async(d, {'sandbox_image': os.environ['ODEK_TEST_IMAGE'], 'sandbox_network': 'none'}, client=c) as sb:\n\
         \x20           assert (await sb.exec(['true'])).ok\n\
         asyncio.run(main())\n\
         try:\n\
         \x20   odek.Client(engine='fake')\n\
         \x20   raise SystemExit('a release build accepted the fake engine')\n\
         except odek.UsageError as e:\n\
         \x20   assert 'test builds' in e.message, e\n\
         print('pip install ./bindings/python: odek', odek.version(), 'from', odek.library_path())",
    ])
    .env("ODEK_TEST_IMAGE", test_image("base")))?;
    installed_cli(&venv, tmp, "pip install ./bindings/python")
}

/// The Go example, built by pkg-config against the prefix from a copy of the
/// module outside the checkout, in a module of its own (as a user's program).
fn go_example(prefix: &Path, tmp: &Path) -> Result<String, String> {
    let module = tmp.join("odek-go");
    copy_tree(&prefix.join("share/odek/go"), &module)?;
    let app = tmp.join("agentloop");
    copy(
        &module.join("examples/agentloop/main.go"),
        &app.join("main.go"),
        0o644,
    )?;
    let gomod = format!(
        "module example.com/agentloop\n\ngo 1.19\n\nrequire github.com/odek-dev/odek/bindings/go v0.0.0\n\nreplace github.com/odek-dev/odek/bindings/go => {}\n",
        module.display()
    );
    io(&app, std::fs::write(app.join("go.mod"), gomod))?;
    let lib = prefix.join("lib");
    let t = target_dir();
    let go = |args: &[&str]| {
        let mut c = Command::new("go");
        c.args(args)
            .current_dir(&app)
            .env("PKG_CONFIG_PATH", lib.join("pkgconfig"))
            .env("CGO_LDFLAGS", format!("-Wl,-rpath,{}", lib.display()))
            .env("CGO_ENABLED", "1")
            .env("GOPROXY", "off")
            .env("GOFLAGS", "-mod=mod")
            .env("GO111MODULE", "on")
            .env("GOTOOLCHAIN", "local")
            .env("GOCACHE", t.join("go-cache"))
            .env("GOPATH", t.join("gopath"))
            .env_remove("CGO_CFLAGS");
        c
    };
    let line = format!(
        "PKG_CONFIG_PATH={}/pkgconfig CGO_LDFLAGS=-Wl,-rpath,{} GOPROXY=off GOFLAGS=-mod=mod go build -o agentloop .",
        lib.display(),
        lib.display()
    );
    sh(&mut go(&["build", "-o", "agentloop", "."]))?;
    let bin = app.join("agentloop");
    let dynamic = output(Command::new("readelf").arg("-d").arg(&bin))?;
    let dynamic = String::from_utf8_lossy(&dynamic);
    if !dynamic.contains("libodek.so") || !dynamic.contains(&*lib.to_string_lossy()) {
        return Err(format!(
            "the Go example does not link {}/libodek.so by its rpath:\n{dynamic}",
            lib.display()
        ));
    }
    if dynamic.contains("target/debug") {
        return Err("the Go example still points at target/debug".into());
    }
    let work = tmp.join("go-workdir");
    io(&work, std::fs::create_dir_all(&work))?;
    let out = output(
        Command::new(&bin)
            .arg("-project")
            .arg(e2e_project())
            .arg("-image")
            .arg(test_image("base"))
            .arg("-workdir")
            .arg(&work)
            .current_dir(tmp)
            .env_remove("LD_LIBRARY_PATH"),
    )?;
    let out = String::from_utf8_lossy(&out);
    eprint!("{out}");
    if !out.contains("PONG") {
        return Err("the Go example's output has no PONG".into());
    }
    // -tags odek_static: pkg-config odek-static links libodek.a in.
    sh(&mut go(&[
        "build",
        "-tags",
        "odek_static",
        "-o",
        "agentloop-static",
        ".",
    ]))?;
    let bin = app.join("agentloop-static");
    let dynamic = output(Command::new("readelf").arg("-d").arg(&bin))?;
    if String::from_utf8_lossy(&dynamic).contains("libodek") {
        return Err("the -tags odek_static build still needs libodek.so".into());
    }
    let out = output(
        Command::new(&bin)
            .arg("-project")
            .arg(e2e_project())
            .arg("-image")
            .arg(test_image("base"))
            .arg("-workdir")
            .arg(&work)
            .current_dir(tmp),
    )?;
    if !String::from_utf8_lossy(&out).contains("PONG") {
        return Err("the static Go example's output has no PONG".into());
    }
    Ok(line)
}

/// README's CLI recipes: `cargo install --locked --path cli` (reusing the
/// release build through CARGO_TARGET_DIR) and the prefix's `bin/odek`,
/// which runs a real sandbox against the Compose fixture.
fn cli(prefix: &Path, tmp: &Path) -> R {
    let cargo_root = tmp.join("cargo-root");
    sh(cargo()
        .args(["install", "--locked", "--quiet", "--path", "cli", "--root"])
        .arg(&cargo_root)
        .env("CARGO_TARGET_DIR", target_dir()))?;
    sh(Command::new(cargo_root.join("bin/odek")).arg("--version"))?;
    // README's second line: the static supervisor beside it (a target of
    // its own, so RUSTFLAGS reach only the supervisor; the cache is the one
    // `cargo xtask` builds it in).
    let host = crate::host_triple()?;
    sh(cargo()
        .args(["install", "--locked", "--quiet", "--path", "supervisor"])
        .args(["--target", &host, "--root"])
        .arg(&cargo_root)
        .env("RUSTFLAGS", "-C target-feature=+crt-static")
        .env("CARGO_TARGET_DIR", target_dir().join("static")))?;
    let work = tmp.join("cli-workdir");
    io(&work, std::fs::create_dir_all(&work))?;
    // README's first example through the cargo-installed odek, with no
    // ODEK_SUPERVISOR naming one: it finds the supervisor beside itself.
    let cmd = &mut Command::new(cargo_root.join("bin/odek"));
    cmd.arg("-C")
        .arg(&work)
        .args(readme_run())
        .env_remove("ODEK_SUPERVISOR")
        .env_remove("ODEK_SUPERVISOR_BIN")
        .current_dir(tmp);
    eprintln!("xtask> {cmd:?}");
    let ran = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    let (out, err) = (
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr),
    );
    if !ran.status.success() || out.trim() != "PONG" || !err.contains(" supervisor=on") {
        return Err(format!(
            "the cargo-installed odek run: expected PONG and supervisor=on, got {} with stdout {out:?} and stderr {err:?}",
            ran.status
        ));
    }
    let out = output(
        Command::new(prefix.join("bin/odek"))
            .arg("-C")
            .arg(&work)
            .args(readme_run())
            .current_dir(tmp),
    )?;
    if String::from_utf8_lossy(&out).trim() != "PONG" {
        return Err(format!(
            "{}/bin/odek run: expected PONG, got {:?}",
            prefix.display(),
            String::from_utf8_lossy(&out)
        ));
    }
    for f in [
        "share/man/man1/odek.1",
        "share/bash-completion/completions/odek",
        "share/zsh/site-functions/_odek",
        "share/fish/vendor_completions.d/odek.fish",
        "lib/pkgconfig/odek.pc",
        "lib/pkgconfig/odek-static.pc",
        "include/odek.h",
        "lib/libodek.a",
    ] {
        if !prefix.join(f).is_file() {
            return Err(format!("{} lacks {f}", prefix.display()));
        }
    }
    Ok(())
}

/// A fresh temporary directory outside the checkout.
fn temp_outside() -> Result<PathBuf, String> {
    let base = std::env::temp_dir();
    let dir = base.join(format!("odek-package-{}", std::process::id()));
    if dir.starts_with(root()) || dir.starts_with(target_dir()) {
        return Err(format!(
            "the temporary directory {} is inside the checkout; set TMPDIR elsewhere",
            dir.display()
        ));
    }
    if dir.exists() {
        io(&dir, std::fs::remove_dir_all(&dir))?;
    }
    io(&dir, std::fs::create_dir_all(&dir))?;
    Ok(dir)
}

/// `cargo xtask package`.
pub(crate) fn package() -> R {
    let t0 = Instant::now();
    crate::images()?;
    sh(Command::new("bash").args(["tests/fixtures/compose/up.sh", &e2e_project()]))?;
    let prefix = default_prefix();
    dist(&prefix, true)?;
    let t_dist = t0.elapsed();
    let tmp = temp_outside()?;
    let result = (|| {
        let wheel = io(&prefix, std::fs::read_dir(prefix.join("share/odek/python")))?
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or("no wheel in the prefix")?;
        let mut times = vec![("dist (release build, wheel)", t_dist)];
        let t = Instant::now();
        cli(&prefix, &tmp)?;
        times.push(("CLI: cargo install, prefix odek run", t.elapsed()));
        let t = Instant::now();
        check_wheel(&wheel, &prefix, &tmp)?;
        python_wheel(&wheel, &tmp)?;
        times.push(("wheel: tag check, venv, pytest", t.elapsed()));
        let t = Instant::now();
        python_source_install(&tmp)?;
        times.push(("pip install ./bindings/python", t.elapsed()));
        let t = Instant::now();
        let line = go_example(&prefix, &tmp)?;
        times.push(("Go example by pkg-config", t.elapsed()));
        eprintln!("\nxtask package: Go build line outside the checkout:\n  {line}");
        let size = std::fs::metadata(&wheel).map(|m| m.len()).unwrap_or(0);
        eprintln!(
            "xtask package: wheel {} ({size} bytes)",
            wheel.file_name().unwrap_or_default().to_string_lossy()
        );
        for (what, d) in times {
            eprintln!("xtask package: {what}: {d:.0?}");
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&tmp);
    eprintln!("xtask package: {:.0?} in all", t0.elapsed());
    result
}

/// README's first example as `odek` arguments: `run` against the e2e
/// Compose project with this checkout's base image, `redis-cli -h redis ping`.
fn readme_run() -> Vec<String> {
    [
        "run",
        "--sandbox-compose",
        &e2e_project(),
        "--sandbox-image",
        &test_image("base"),
        "--",
        "redis-cli",
        "-h",
        "redis",
        "ping",
    ]
    .map(str::to_string)
    .to_vec()
}
