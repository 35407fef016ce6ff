"""Streaming exec (``Sandbox.exec_stream``, ``AsyncSandbox.exec_stream``).

Two tiers: the in-memory engine with the sandbox off, so commands run on
the host and really print (no Docker); and real Docker (marker
``docker``), through the exec API or odek's supervisor as ODEK_SUPERVISOR
says. "The first chunk arrives before the command ends" is shown by
ordering, never timing: the command prints ``a``, then waits until the
test — on seeing ``a`` — creates a file in the workdir (``/workspace`` in a
sandbox); were chunks held until the end, the command would time out.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import threading
import warnings

import pytest
from conftest import IMAGE

import odek
from odek import _ffi

WAIT_FOR_GO = "echo a; echo oops >&2; while [ ! -e go ]; do sleep 0.02; done; echo b; exit 3"


def stdout_of(chunks) -> bytes:
    return b"".join(c.data for c in chunks if c.stream == "stdout")


def stderr_of(chunks) -> bytes:
    return b"".join(c.data for c in chunks if c.stream == "stderr")


def check_wait_for_go(sandbox, workdir: str) -> None:
    """The first chunk comes while the command waits for it; the result."""
    chunks = []
    with sandbox.exec_stream(shell=WAIT_FOR_GO, timeout=60) as run:
        for chunk in run:
            assert isinstance(chunk, odek.OutputChunk)
            chunks.append(chunk)
            if chunk.stream == "stdout" and not os.path.exists(os.path.join(workdir, "go")):
                # The command cannot end before this file exists.
                assert not run.done
                open(os.path.join(workdir, "go"), "w").close()
    r = run.result
    assert (r.exit_code, r.timed_out) == (3, False), r
    assert stdout_of(chunks) == b"a\nb\n"
    assert stderr_of(chunks) == b"oops\n"
    # the result is exec()'s: the same output, apart
    assert (r.stdout, r.stderr) == ("a\nb\n", "oops\n")


def check_timeout(sandbox, workdir: str) -> None:
    run = sandbox.exec_stream(shell="echo a; sleep 30; touch late", timeout=2)
    chunks = list(run)
    assert stdout_of(chunks) == b"a\n"
    r = run.result
    assert (r.exit_code, r.timed_out, r.killed) == (124, True, True), r
    assert not os.path.exists(os.path.join(workdir, "late"))


def check_async(sandbox, workdir: str) -> None:
    async def go():
        s = odek.AsyncSandbox(sandbox)
        chunks = []
        async with s.exec_stream(shell=WAIT_FOR_GO, timeout=60) as run:
            async for chunk in run:
                chunks.append(chunk)
                if chunk.stream == "stdout" and not os.path.exists(os.path.join(workdir, "go")):
                    open(os.path.join(workdir, "go"), "w").close()
        assert run.result.exit_code == 3
        assert stdout_of(chunks) == b"a\nb\n" and stderr_of(chunks) == b"oops\n"

        # Cancelling the iterating task kills the command.
        started = asyncio.Event()

        async def consume(r):
            async for _ in r:
                started.set()

        r2 = s.exec_stream(shell="echo a; sleep 30; touch late2")
        task = asyncio.ensure_future(consume(r2))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(odek.CancelledError):
            await r2.wait()
        assert not os.path.exists(os.path.join(workdir, "late2"))

    asyncio.run(go())


def check_close_kills(sandbox, workdir: str) -> None:
    run = sandbox.exec_stream(shell="echo a; sleep 30; touch late3")
    assert next(run) == odek.OutputChunk("stdout", b"a\n")
    run.close()
    assert run.done
    with pytest.raises(odek.CancelledError):
        run.result
    assert not os.path.exists(os.path.join(workdir, "late3"))


# --- no Docker: the host, through the fake engine with the sandbox off --------------


@pytest.fixture
def host_sandbox(fake_client, workdir):
    plan = fake_client.resolve(workdir, {"sandbox": False}, read_user_config=False)
    assert plan.isolation == "off"
    with fake_client.launch(plan) as s:
        yield s


def test_chunks_come_while_the_command_runs(host_sandbox, workdir):
    check_wait_for_go(host_sandbox, workdir)


def test_timeout(host_sandbox, workdir):
    check_timeout(host_sandbox, workdir)


def test_async_for_and_task_cancel(host_sandbox, workdir):
    check_async(host_sandbox, workdir)


def test_closing_the_stream_kills_the_command(host_sandbox, workdir):
    check_close_kills(host_sandbox, workdir)


def test_the_callback_runs_on_the_streams_own_thread(host_sandbox, monkeypatch):
    seen = []
    real = _ffi.OutputFn

    def spy(fn):
        def wrapped(*a):
            seen.append(threading.current_thread().name)
            return fn(*a)
        return real(wrapped)

    monkeypatch.setattr(_ffi, "OutputFn", spy)
    assert host_sandbox.exec_stream(argv=["echo", "x"]).wait().stdout == "x\n"
    assert seen and set(seen) == {"odek-exec-stream"}


def test_wait_and_result_before_the_end(host_sandbox):
    run = host_sandbox.exec_stream(shell="printf x; exit 7")
    with pytest.raises(RuntimeError, match="iterate the stream to its end"):
        run.result
    r = run.wait()
    assert (r.exit_code, r.stdout) == (7, "x")
    assert list(run) == []  # ended: nothing more


def test_a_dropped_stream_kills_its_command(host_sandbox, workdir):
    run = host_sandbox.exec_stream(shell="echo a; sleep 30; touch late")
    assert next(run).data == b"a\n"
    thread = run._call.thread
    del run
    gc.collect()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert not os.path.exists(os.path.join(workdir, "late"))


def test_misuse_runs_nothing(host_sandbox, workdir):
    with pytest.raises(odek.UsageError):
        host_sandbox.exec_stream(shell="touch ran", argv=["touch", "ran"]).wait()
    with pytest.raises(TypeError):
        host_sandbox.exec_stream("touch ran")
    token = odek.CancelToken()
    token.cancel()
    with pytest.raises(odek.CancelledError):
        host_sandbox.exec_stream(shell="touch ran", cancel=token).wait()
    assert not os.path.exists(os.path.join(workdir, "ran"))
    host_sandbox.exec_stream(shell="touch ran").wait()  # positive control
    assert os.path.exists(os.path.join(workdir, "ran"))


def test_an_older_library_without_the_function_is_a_clear_error(host_sandbox, workdir, monkeypatch):
    real = _ffi.lib()

    class Older:
        """The loaded library as one from before odek_exec_stream."""

        def __getattr__(self, name):
            if name == "odek_exec_stream":
                raise AttributeError(name)
            return getattr(real, name)

    monkeypatch.setattr(_ffi, "_lib", Older())
    with pytest.raises(odek.MissingFunctionError) as e:
        host_sandbox.exec_stream(shell="touch ran")
    assert e.value.function == "odek_exec_stream"
    assert "older libodek" in str(e.value) and "ODEK_LIB" in str(e.value)
    assert isinstance(e.value, odek.LibraryError)
    assert not os.path.exists(os.path.join(workdir, "ran"))
    # the buffered exec still works with that library
    assert host_sandbox.exec(argv=["true"]).exit_code == 0


# --- real Docker ------------------------------------------------------------------


@pytest.fixture
def docker_sandbox(docker_client, docker_workdir, compose_project):
    settings = {"sandbox": True, "sandbox_image": IMAGE, "sandbox_compose_project": compose_project}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", odek.OdekWarning)  # the fixture's non-internal network
        sandbox = docker_client.launch(docker_client.resolve(docker_workdir, settings))
    with sandbox as s:
        yield s


@pytest.mark.docker
def test_docker_chunks_come_while_the_command_runs(docker_sandbox, docker_workdir):
    check_wait_for_go(docker_sandbox, docker_workdir)


@pytest.mark.docker
def test_docker_timeout(docker_sandbox, docker_workdir):
    check_timeout(docker_sandbox, docker_workdir)


@pytest.mark.docker
def test_docker_async_for_and_task_cancel(docker_sandbox, docker_workdir):
    check_async(docker_sandbox, docker_workdir)


@pytest.mark.docker
def test_docker_closing_the_stream_kills_the_command(docker_sandbox, docker_workdir):
    check_close_kills(docker_sandbox, docker_workdir)


@pytest.mark.docker
def test_docker_which_path(docker_sandbox):
    """The path the commands take follows ODEK_SUPERVISOR (both stream)."""
    r = docker_sandbox.exec(shell="test -e /.odek/odek-supervisor && echo supervisor || echo exec-api")
    # The path follows what odek says of the sandbox: the supervisor named
    # (ODEK_SUPERVISOR) or found beside libodek (the nonroot suite).
    on = docker_sandbox.info.startup_line.endswith(" supervisor=on")
    if os.environ.get("ODEK_SUPERVISOR"):
        assert on, docker_sandbox.info.startup_line
    assert r.stdout.strip() == ("supervisor" if on else "exec-api"), r


def test_stdin_on_the_host_is_refused_and_runs_nothing(host_sandbox, workdir):
    """Stdin is served by odek's supervisor only: on the host the stream
    raises (402) and the command never ran."""
    with pytest.raises(odek.DockerRejectedError) as e:
        host_sandbox.exec_stream(shell="cat > ran", stdin=b"x").wait()
    assert "supervisor" in str(e.value)
    assert not os.path.exists(os.path.join(workdir, "ran"))
    with pytest.raises(TypeError):
        host_sandbox.exec_stream(shell="cat > ran", stdin="text")
    run = host_sandbox.exec_stream(argv=["true"])
    with pytest.raises(RuntimeError):
        run.write(b"x")
    assert run.wait().exit_code == 0  # positive control, without stdin


@pytest.mark.docker
def test_docker_stdin_round_trip(docker_sandbox, docker_workdir):
    """Bytes written while the command runs reach its stdin, the close ends
    it; bytes given at the start are written and closed."""
    if not docker_sandbox.info.startup_line.endswith(" supervisor=on"):
        with pytest.raises(odek.DockerRejectedError):
            docker_sandbox.exec_stream(shell="cat > ran", stdin=b"x").wait()
        assert not os.path.exists(os.path.join(docker_workdir, "ran"))
        return
    run = docker_sandbox.exec_stream(argv=["cat"], stdin=True, timeout=60)
    run.write(b"hello ")
    run.write(b"\x00world\n")
    run.close_stdin()
    result = run.wait()
    assert result.exit_code == 0, result
    assert result.stdout == "hello \x00world\n", result
    with pytest.raises(odek.OdekError):
        run.write(b"late")
    r = docker_sandbox.exec_stream(shell="wc -c", stdin=b"abc" * 1000, timeout=60).wait()
    assert r.stdout.strip() == "3000", r


@pytest.mark.docker
def test_docker_async_stdin_round_trip(docker_sandbox, docker_workdir):
    """The asyncio stream takes stdin as the sync one does: written from
    the event loop while the command runs (never blocking it), closed to
    end it; without the supervisor it raises 402 and nothing ran."""
    s = odek.AsyncSandbox(docker_sandbox)

    async def go():
        if not docker_sandbox.info.startup_line.endswith(" supervisor=on"):
            with pytest.raises(odek.DockerRejectedError):
                await s.exec_stream(shell="cat > ran", stdin=b"x").wait()
            return None
        run = s.exec_stream(argv=["cat"], stdin=True, timeout=60)
        run.write(b"async ")
        run.write(b"\x00in\n")
        run.close_stdin()
        seen = b""
        async for chunk in run:
            seen += chunk.data
        r = await s.exec_stream(shell="wc -c", stdin=b"xy" * 500, timeout=60).wait()
        return seen, run.result, r

    out = asyncio.run(go())
    if out is None:
        assert not os.path.exists(os.path.join(docker_workdir, "ran"))
        return
    seen, result, r = out
    assert seen == b"async \x00in\n", seen
    assert result.exit_code == 0, result
    assert r.stdout.strip() == "1000", r


SERVER_PID = (
    'for p in /proc/[0-9]*; do [ "$(cat "$p/comm" 2>/dev/null)" = odek-server ] '
    '&& echo "${p#/proc/}"; done; true'
)


def _server_pid(container: str) -> str:
    """The supervisor's server in the container, found from outside
    (``docker exec`` as root; no command of the sandbox can signal it)."""
    out = subprocess.run(["docker", "exec", "-u", "0", container, "sh", "-c", SERVER_PID],
                         check=True, capture_output=True, text=True).stdout.split()
    assert len(out) == 1, out
    return out[0]


@pytest.mark.docker
def test_docker_a_killed_supervisor_server_leaves_the_command_unknown(docker_sandbox):
    """Through the owner's session (the binding holds it): the server killed
    from outside mid-command makes that command's status unknown (an error,
    never an exit status), the restart is said in it, and the next command
    runs on the new server."""
    if not docker_sandbox.info.startup_line.endswith(" supervisor=on"):
        # No supervisor (the exec API's path), as ODEK_SUPERVISOR says.
        assert not os.environ.get("ODEK_SUPERVISOR"), docker_sandbox.info.startup_line
        return
    container = docker_sandbox.info.container_id
    before = _server_pid(container)
    run = docker_sandbox.exec_stream(shell="echo started; sleep 30; echo finished", timeout=60)
    assert next(iter(run)).data == b"started\n"
    subprocess.run(["docker", "exec", "-u", "0", container, "sh", "-c", f"kill -9 {before}"],
                   check=True)
    with pytest.raises(odek.DockerRejectedError) as e:
        run.wait()
    assert e.value.code == 402, e.value
    assert "restarted" in str(e.value) and "status is unknown" in str(e.value), e.value
    after = _server_pid(container)
    assert after != before
    r = docker_sandbox.exec(shell="echo ok; pgrep -x sleep || echo gone", timeout=30)
    assert (r.exit_code, r.stdout) == (0, "ok\ngone\n"), r
