"""Shared fixtures for the odek Python binding tests.

Tiers: header/ctypes checks (no Docker), fake-engine tests (no Docker) and
real-Docker tests (marker ``docker``). Real-Docker tests FAIL — never skip —
when Docker is unavailable (e2e never skips silently); deselect them
explicitly with ``-m "not docker"`` if you must.

Isolation: ``ODEK_HOME`` points at a fresh directory for the whole session
(no user config, no stored trusts), ``ODEK_*`` switches from the caller's
environment are removed, and every sandbox uses its own temporary working
directory, checked afterwards — by the ``dev.odek.workdir`` label — for
containers left behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Callable, Iterator, List

import pytest

# The odek checkout (fixtures, test images, header). The tests normally sit
# in it; `cargo xtask package` copies them out and runs them against an
# installed wheel, pointing ODEK_TEST_REPO back at the checkout.
REPO = Path(os.environ.get("ODEK_TEST_REPO") or Path(__file__).resolve().parents[3])
HEADER = REPO / "ffi" / "include" / "odek.h"
BINDING = REPO / "bindings" / "python"
# This checkout's test namespace (xtask/src/ns.rs, tests/ns.sh): ODEK_TEST_NS
# as `cargo xtask` exports it, else the first 8 hex digits of SHA-256 of the
# checkout's canonical path, so checkouts sharing a Docker daemon never use
# each other's images or Compose project.
TEST_NS = os.environ.get("ODEK_TEST_NS") or hashlib.sha256(
    os.path.realpath(REPO).encode()).hexdigest()[:8]
IMAGE_PREFIX = f"odek-test-{TEST_NS}"
IMAGE = f"{IMAGE_PREFIX}/base:1"
PROJECT = os.environ.get("ODEK_TEST_COMPOSE_PROJECT", f"odeke2e{TEST_NS}")
# The fake engine's image (and its Compose project "shop"): no Docker.
FAKE_IMAGE = "odek-test/base:1"

# Keep the caller's ODEK_* switches (ODEK_SANDBOX=false, ODEK_REQUIRE_SANDBOX…)
# out of the tests; keep only how to find the library, and ODEK_SUPERVISOR
# (odek's supervisor binary: set, sandboxes run commands through it; the
# suite runs with it set and unset, as the e2e suite forwards it).
os.environ["ODEK_TEST_NS"] = TEST_NS  # for tests/images/build.sh and up.sh
for _k in list(os.environ):
    if _k.startswith("ODEK_") and _k not in (
        "ODEK_LIB", "ODEK_TEST_COMPOSE_PROJECT", "ODEK_TEST_REPO", "ODEK_SUPERVISOR",
        "ODEK_TEST_NS",
    ):
        del os.environ[_k]
SESSION_HOME = tempfile.mkdtemp(prefix="odek-pytest-home-")
os.environ["ODEK_HOME"] = SESSION_HOME

import odek  # noqa: E402  (after the environment is set)


def pytest_configure(config):
    # Also declared in pyproject.toml; registered here too for runs from a
    # copy of these tests outside the checkout (cargo xtask package).
    config.addinivalue_line(
        "markers", "docker: needs a real Docker daemon (fails, never skips, when it is missing)"
    )
    config.addinivalue_line(
        "markers", "fake: needs the in-memory engine of a test build of libodek (feature testing)"
    )


def pytest_collection_modifyitems(config, items):  # noqa: ARG001
    # A test on the fake_client fixture needs the fake engine.
    for item in items:
        if "fake_client" in getattr(item, "fixturenames", ()):
            item.add_marker("fake")


def pytest_sessionfinish(session, exitstatus):  # noqa: ARG001
    shutil.rmtree(SESSION_HOME, ignore_errors=True)


# --- Docker helpers ----------------------------------------------------------------


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", *args], capture_output=True, text=True, check=check, timeout=timeout
    )


def containers_for(workdir: str) -> List[str]:
    """IDs of odek sandbox containers (running or not) for a working directory."""
    out = docker(
        "ps", "-aq",
        "--filter", "label=dev.odek.sandbox=true",
        "--filter", f"label=dev.odek.workdir={workdir}",
    ).stdout
    return out.split()


def container_exists(container_id: str) -> bool:
    return docker("inspect", container_id, check=False).returncode == 0


def assert_no_container(workdir: str) -> None:
    left = containers_for(workdir)
    if left:
        docker("rm", "-f", *left, check=False)
        pytest.fail(f"odek left containers behind for {workdir}: {left} (removed now)")


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """A reachable Docker daemon with the offline test images — or a FAILURE."""
    if shutil.which("docker") is None:
        pytest.fail("real-Docker tests need the docker CLI and a daemon; none found (not skipping)")
    info = docker("info", "--format", "{{.ServerVersion}}", check=False, timeout=60)
    if info.returncode != 0:
        pytest.fail(f"real-Docker tests need a running daemon (not skipping): {info.stderr.strip()}")
    build = subprocess.run(
        ["bash", str(REPO / "tests/images/build.sh")],
        cwd=REPO, capture_output=True, text=True, timeout=1200,
    )
    if build.returncode != 0:
        pytest.fail(f"tests/images/build.sh failed:\n{build.stderr[-3000:]}")
    if docker("image", "inspect", IMAGE, check=False).returncode != 0:
        pytest.fail(f"test image {IMAGE} is missing after tests/images/build.sh")


@pytest.fixture(scope="session")
def compose_project(docker_engine: None) -> str:
    """The fixture Compose project (Redis + Postgres), brought up idempotently."""
    up = subprocess.run(
        ["bash", str(REPO / "tests/fixtures/compose/up.sh"), PROJECT],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    if up.returncode != 0:
        pytest.fail(f"tests/fixtures/compose/up.sh {PROJECT} failed:\n{up.stderr[-3000:]}")
    return PROJECT


# --- working directories -----------------------------------------------------------


@pytest.fixture
def workdir(tmp_path: Path) -> str:
    """A fresh working directory (no Docker check: for fake-engine tests)."""
    d = tmp_path / "project"
    d.mkdir()
    return os.path.realpath(d)


@pytest.fixture
def docker_workdir(docker_engine: None, tmp_path: Path) -> Iterator[str]:
    """A fresh working directory; afterwards no sandbox may be left for it."""
    d = tmp_path / "project"
    d.mkdir()
    path = os.path.realpath(d)
    yield path
    assert_no_container(path)


@pytest.fixture
def make_workdirs(docker_engine: None, tmp_path: Path) -> Iterator[Callable[[int], List[str]]]:
    """Makes n fresh working directories, each checked for leftovers afterwards."""
    made: List[str] = []

    def make(n: int) -> List[str]:
        out = []
        for i in range(n):
            d = tmp_path / f"project-{len(made) + i}"
            d.mkdir()
            out.append(os.path.realpath(d))
        made.extend(out)
        return out

    yield make
    left = {w: containers_for(w) for w in made}
    left = {w: ids for w, ids in left.items() if ids}
    if left:
        for ids in left.values():
            docker("rm", "-f", *ids, check=False)
        pytest.fail(f"odek left containers behind: {left} (removed now)")


# --- clients -----------------------------------------------------------------------


@pytest.fixture
def fake_client() -> Iterator[odek.Client]:
    with odek.Client(engine="fake") as c:
        yield c


@pytest.fixture
def docker_client(docker_engine: None) -> Iterator[odek.Client]:
    with odek.Client() as c:
        yield c


def write_project_config(workdir: str, config: dict) -> None:
    with open(os.path.join(workdir, "odek.json"), "w") as f:
        json.dump(config, f)
