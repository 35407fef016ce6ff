"""Build of the ``odek`` wheel: libodek (odek-ffi, release) compiled by cargo
through setuptools-rust and bundled as ``odek/libodek.so``; the wheel is tagged
``py3-none-<platform>`` with the platform read from the built library (see
``build_support/elfdeps.py``). Metadata lives in ``pyproject.toml``.

    pip install ./bindings/python        # or: pip wheel ./bindings/python

Needs cargo (Rust >= the workspace's rust-version) and a C linker. The crate
is the repository's ``ffi/`` (``../../ffi/Cargo.toml``), so this builds from a
checkout (pip builds local directories in place), not from an sdist.
``CARGO_TARGET_DIR`` is honoured, so a release build made by
``cargo xtask dist`` is reused.

Packagers who build libodek separately (the Nix package) set
``ODEK_PREBUILT_LIBODEK=/path/to/libodek.so``: that file is bundled instead
and cargo is not run.

The wheel also carries odek's supervisor, a static ``odek-supervisor``, as
``odek/odek-supervisor`` beside ``libodek.so``, where libodek looks for it
(docs/SANDBOXING.md, "The supervisor"): ``ODEK_SUPERVISOR_BIN`` names a
built one (``cargo xtask`` sets it); otherwise cargo builds it
(``-C target-feature=+crt-static``, release, into
``$CARGO_TARGET_DIR/static``). A binary that is not a static executable
fails the build.

The wheel carries the ``odek`` CLI too (``cli/``, release, a setuptools-rust
``RustBin``), installed as a script, so ``pip install`` (and ``pipx`` or
``uv tool install`` of the wheel) puts ``odek`` on PATH; and a second copy
of the supervisor as wheel data in ``libexec/odek/odek-supervisor`` (under
the environment's prefix), which is where the CLI looks for it:
``<dir of odek>/../libexec/odek/``. With ``ODEK_PREBUILT_LIBODEK``,
``ODEK_PREBUILT_CLI=/path/to/odek`` names a built CLI to bundle; without it
that wheel has no CLI (the Nix package ships the CLI on its own).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
try:
    from setuptools.command.install_data import install_data
except ImportError:  # setuptools without its own install_data command
    from distutils.command.install_data import install_data

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "build_support"))
import elfdeps  # noqa: E402

LIB = "libodek.so"
PREBUILT = os.environ.get("ODEK_PREBUILT_LIBODEK")
PREBUILT_CLI = os.environ.get("ODEK_PREBUILT_CLI")
# Where the CLI looks for the supervisor, relative to the environment's
# prefix (its scripts are in <prefix>/bin).
SUPERVISOR_DATA_DIR = "libexec/odek"
SUPERVISOR = "odek-supervisor"
# The egress proxy (docs/SPEC.md §4.5), bundled and found the same way.
EGRESS = "odek-egress"


def supervisor_binary() -> Path:
    """The static supervisor to bundle: ``ODEK_SUPERVISOR_BIN``, or one cargo
    builds now. Raises when it is not a static ELF executable."""
    return static_binary("ODEK_SUPERVISOR_BIN", SUPERVISOR)


def egress_binary() -> Path:
    """The static egress proxy to bundle: ``ODEK_EGRESS_BIN``, or one cargo
    builds now. Raises when it is not a static ELF executable."""
    return static_binary("ODEK_EGRESS_BIN", EGRESS)


def static_binary(var: str, name: str) -> Path:
    """The static binary ``name`` (also its cargo package): ``$var``, or one
    cargo builds now. Raises when it is not a static ELF executable."""
    given = os.environ.get(var)
    if given:
        path = Path(given)
    else:
        import subprocess

        host = next(
            line.split(": ", 1)[1]
            for line in subprocess.run(["rustc", "-vV"], check=True, capture_output=True, text=True).stdout.splitlines()
            if line.startswith("host: ")
        )
        target = Path(os.environ.get("CARGO_TARGET_DIR") or HERE.parents[1] / "target") / "static"
        env = dict(os.environ, RUSTFLAGS="-C target-feature=+crt-static", CARGO_TARGET_DIR=str(target))
        subprocess.run(
            ["cargo", "build", "--release", "-p", name, "--bin", name, "--target", host],
            check=True,
            cwd=HERE.parents[1],
            env=env,
        )
        path = target / host / "release" / name
    if not elfdeps.is_static_executable(str(path)):
        raise RuntimeError(f"odek wheel: {path} is not a static executable (build it with -C target-feature=+crt-static)")
    return path


class BuildPySupervisor(build_py):
    """Bundles the static supervisor as ``odek/odek-supervisor``."""

    def run(self) -> None:
        super().run()
        for name, binary in ((SUPERVISOR, supervisor_binary()), (EGRESS, egress_binary())):
            dest = Path(self.build_lib) / "odek" / name
            shutil.copyfile(binary, dest)
            os.chmod(dest, 0o755)


class InstallDataSupervisor(install_data):
    """Installs the supervisor as ``<prefix>/libexec/odek/odek-supervisor``,
    beside the CLI's ``<prefix>/bin/odek`` as the CLI looks for it."""

    def run(self) -> None:
        self.data_files = [(SUPERVISOR_DATA_DIR, [str(supervisor_binary()), str(egress_binary())])]
        super().run()
        for out in self.get_outputs():
            os.chmod(out, 0o755)


class BdistWheel(bdist_wheel):
    """A platform wheel for any Python 3: the package is pure Python over a
    C library (ctypes), so neither the interpreter nor its ABI matters; the
    platform tag is the one the bundled library truly needs."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):  # type: ignore[no-untyped-def]
        libs = sorted(Path(self.bdist_dir).glob(f"**/odek/{LIB}"))
        if not libs:
            raise RuntimeError(f"odek wheel: no odek/{LIB} under {self.bdist_dir} to tag the wheel by")
        return "py3", "none", elfdeps.read(str(libs[0])).platform_tag()


cmdclass = {"bdist_wheel": BdistWheel, "install_data": InstallDataSupervisor}
# install_data runs only for a distribution with data files: the entry's
# file list is filled in by InstallDataSupervisor when it runs.
data_files = [(SUPERVISOR_DATA_DIR, [])]
scripts = []

if PREBUILT:

    class BuildPyPrebuilt(BuildPySupervisor):
        def run(self) -> None:
            super().run()
            dest = Path(self.build_lib) / "odek" / LIB
            shutil.copyfile(PREBUILT, dest)
            os.chmod(dest, 0o755)

    cmdclass["build_py"] = BuildPyPrebuilt
    rust_extensions = []
    if PREBUILT_CLI:
        scripts = [PREBUILT_CLI]
else:
    if shutil.which("cargo") is None or shutil.which("rustc") is None:
        # One line that names the cause and both fixes, before pip's wall.
        raise SystemExit(
            "odek: building this package compiles libodek and the odek CLI from Rust, "
            "so Rust's cargo and rustc must be on PATH (https://rustup.rs); without Rust, "
            "install a wheel built once elsewhere: pip install odek-*.whl "
            "(made there with: pip wheel ./bindings/python -w dist/)"
        )
    from setuptools_rust import Binding, RustBin, RustExtension
    from setuptools_rust.build import build_rust

    class BuildRust(build_rust):
        """Installs the cdylib as ``odek/libodek.so`` (the name ctypes looks
        for), not under a CPython extension-module name."""

        def get_dylib_ext_path(self, ext, target_fname):  # type: ignore[no-untyped-def]
            path = super().get_dylib_ext_path(ext, target_fname)
            return os.path.join(os.path.dirname(path), LIB)

    cmdclass["build_rust"] = BuildRust
    cmdclass["build_py"] = BuildPySupervisor

    def crate_types(manifest: Path) -> str:
        """ffi/Cargo.toml's ``crate-type`` list, comma-joined."""
        m = re.search(r"^crate-type\s*=\s*\[([^\]]*)\]", manifest.read_text(), re.M)
        if m is None:
            raise RuntimeError(f"{manifest}: no crate-type list")
        return ",".join(re.findall(r'"([^"]+)"', m.group(1)))

    MANIFEST = "../../ffi/Cargo.toml"
    rust_extensions = [
        RustExtension(
            "odek.libodek",
            path=MANIFEST,
            binding=Binding.NoBinding,
            debug=False,  # always release, also for editable installs
            quiet=False,
            # setuptools-rust runs `cargo rustc --crate-type cdylib`, a
            # different unit from `cargo build -p odek-ffi --release`, so each
            # build would redo odek-ffi (and its LTO link) and overwrite the
            # other's libodek.so. Asking for the manifest's own crate types
            # makes it the same unit: `cargo xtask dist` and the wheel share
            # one release build (cargo reports it fresh).
            args=["--crate-type", crate_types(HERE / MANIFEST)],
        ),
        # The CLI, installed as a script (<prefix>/bin/odek).
        RustBin("odek", path="../../cli/Cargo.toml", debug=False, quiet=False),
    ]

setup(cmdclass=cmdclass, rust_extensions=rust_extensions, data_files=data_files, scripts=scripts)
