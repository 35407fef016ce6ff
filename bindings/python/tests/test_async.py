"""The asyncio API (odek.AsyncClient, odek.AsyncSandbox, odek.launch_async):
fake-engine behaviour, cancellation, and one real-Docker run that checks the
event loop keeps running while libodek blocks."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest
from conftest import FAKE_IMAGE, IMAGE, container_exists

import odek
from odek import _client

SHOP = {"sandbox_image": FAKE_IMAGE, "sandbox_compose_project": "shop"}


def run(coro):
    return asyncio.run(coro)


@pytest.mark.fake
def test_launch_async_as_context_manager(workdir):
    async def main():
        async with odek.AsyncClient(engine="fake") as client:
            async with odek.launch_async(workdir, SHOP, client=client) as sandbox:
                assert isinstance(sandbox, odek.AsyncSandbox)
                assert isinstance(sandbox.sync, odek.Sandbox)
                assert sandbox.isolation == "container" and sandbox.name.startswith("odek-")
                r = await sandbox.exec(["true"], timeout=5)
                assert isinstance(r, odek.ExecResult) and r.ok
                d = await sandbox.describe()
                assert "Execution environment" in d.prompt
                assert {n.name for n in d.networks} == {"shop_default", "shop_backend"}
            assert sandbox.closed
            with pytest.raises(odek.InvalidHandleError):
                await sandbox.exec(["true"])
        assert client.closed

    run(main())


@pytest.mark.fake
def test_awaited_launch_is_owned_by_the_caller(workdir):
    async def main():
        client = odek.AsyncClient(engine="fake")
        sandbox = await odek.launch_async(workdir, SHOP, client=client)
        assert not sandbox.closed
        assert (await sandbox.exec(shell="echo hi")).exit_code == 0
        await sandbox.close()
        await sandbox.close()  # idempotent
        assert sandbox.closed
        await client.close()
        await client.close()

    run(main())


@pytest.mark.fake
def test_async_client_verbs_and_approval(workdir):
    import json
    import os

    with open(os.path.join(workdir, "odek.json"), "w") as f:
        json.dump({"sandbox_compose_project": "shop", "sandbox_image": FAKE_IMAGE}, f)

    async def main():
        async with odek.AsyncClient(engine="fake") as client:
            plan = await client.resolve(workdir, read_user_config=False)
            assert isinstance(plan, odek.Plan) and plan.approval_request is not None
            with pytest.raises(odek.ApprovalRequiredError):
                await client.launch(plan)
            approval = await client.approve(plan, "once")
            view = await client.config_view(plan)
            assert view.image == FAKE_IMAGE
            async with await client.launch(plan, approval) as sandbox:
                assert (await sandbox.exec(["true"])).ok
            assert sandbox.closed

    run(main())


@pytest.mark.fake
def test_errors_are_the_sync_exceptions(workdir):
    async def main():
        async with odek.AsyncClient(engine="fake") as client:
            with pytest.raises(odek.ConfigError):
                await client.resolve(workdir, {"sandbox_pids_limit": -1})
            with pytest.raises(odek.ConfigError):
                await odek.launch_async(workdir, {**SHOP, "sandbox_memory": "lots"}, client=client)
        with pytest.raises(ValueError):
            odek.launch_async(workdir, approve="always")

    run(main())


@pytest.mark.fake
def test_exception_in_block_removes_the_sandbox(workdir):
    async def main():
        async with odek.AsyncClient(engine="fake") as client:
            with pytest.raises(KeyError):
                async with odek.launch_async(workdir, SHOP, client=client) as sandbox:
                    raise KeyError("agent crashed")
            assert sandbox.closed

    run(main())


@pytest.mark.fake
def test_cancelled_launch_does_not_leak_the_sandbox(workdir, monkeypatch):
    freed = []
    real_free = _client.Sandbox._free

    def spy(self, ptr):
        freed.append(self.name)
        real_free(self, ptr)

    monkeypatch.setattr(_client.Sandbox, "_free", spy)
    gate = threading.Event()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        async def main():
            client = odek.AsyncClient(engine="fake", executor=pool)
            # occupy the only thread, so the launch waits until we cancel
            pool.submit(gate.wait, 30)
            task = asyncio.ensure_future(odek.launch_async(workdir, SHOP, client=client))
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            gate.set()  # now the launch runs to the end, in its thread
            for _ in range(200):
                if freed:
                    break
                await asyncio.sleep(0.05)
            await client.close()

        run(main())
    finally:
        gate.set()
        pool.shutdown(wait=True)
    assert len(freed) == 1 and freed[0].startswith("odek-"), freed


def test_async_client_wraps_an_existing_client(fake_client, workdir):
    async def main():
        client = odek.AsyncClient(client=fake_client)
        assert client.sync is fake_client
        async with odek.launch_async(workdir, SHOP, client=fake_client) as sandbox:
            assert (await sandbox.exec(["true"])).ok
        with pytest.raises(TypeError):
            odek.AsyncClient(client=fake_client, engine="fake")

    run(main())


@pytest.mark.docker
def test_async_real_docker_loop_keeps_running(docker_engine, docker_workdir, compose_project):
    async def main():
        settings = {"sandbox": True, "sandbox_image": IMAGE,
                    "sandbox_compose_project": compose_project}
        async with odek.launch_async(docker_workdir, settings) as sandbox:
            cid = sandbox.container_id
            assert cid and container_exists(cid)
            r = await sandbox.exec(["redis-cli", "-h", "redis", "ping"], timeout=30)
            assert (r.exit_code, r.stdout.strip()) == (0, "PONG")

            ticks = 0
            done = False

            async def tick():
                nonlocal ticks
                while not done:
                    ticks += 1
                    await asyncio.sleep(0.01)

            ticker = asyncio.ensure_future(tick())
            t0 = time.monotonic()
            # three 1 s commands at once: run side by side, and the loop ticks meanwhile
            results = await asyncio.gather(*(sandbox.exec(["sleep", "1"]) for _ in range(3)))
            elapsed = time.monotonic() - t0
            done = True
            await ticker
            assert all(x.exit_code == 0 for x in results)
            assert elapsed < 2.9, f"three concurrent 1 s execs took {elapsed:.1f} s"
            assert ticks >= 30, f"the event loop only ticked {ticks} times"
        assert not container_exists(cid)

    run(main())


@pytest.mark.fake
def test_async_launch_emits_plan_warnings_in_the_loop_thread(workdir):
    async def main():
        async with odek.AsyncClient(engine="fake") as client:
            with pytest.warns(odek.OdekWarning, match="not internal") as caught:
                async with odek.launch_async(workdir, SHOP, client=client):
                    pass
            assert "attached_network_not_internal" in [w.message.kind for w in caught]
            assert {w.filename for w in caught} == {__file__}
            with pytest.warns(odek.OdekWarning, match="not internal") as caught:
                sandbox = await odek.launch_async(workdir, SHOP, client=client)
            await sandbox.close()
            assert {w.filename for w in caught} == {__file__}
            plan = await client.resolve(workdir, SHOP)
            with pytest.warns(odek.OdekWarning, match="shop_default") as caught:
                sandbox = await client.launch(plan)
            await sandbox.close()
            assert {w.filename for w in caught} == {__file__}
            assert {w.message.kind for w in caught} == {x.kind for x in sandbox.info.warnings}

    run(main())


@pytest.mark.docker
def test_async_cancelled_exec_kills_the_command(docker_engine, docker_workdir):
    # Cancelling the task awaiting exec raises CancelledError at once and
    # libodek kills the command in the sandbox (odek_exec_cancellable),
    # instead of leaving it running until the sandbox is closed.
    probe = ["sh", "-c", "grep -s -a -l '[s]leep.41' /proc/[0-9]*/cmdline || true"]

    async def main():
        settings = {"sandbox": True, "sandbox_image": IMAGE, "sandbox_network": "none"}
        async with odek.launch_async(docker_workdir, settings) as sandbox:
            task = asyncio.ensure_future(sandbox.exec(shell="sleep 41; echo done"))
            await asyncio.sleep(1.0)
            assert (await sandbox.exec(probe)).stdout.strip(), "the command runs"
            t0 = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - t0 < 2, "the cancel returned at once"
            left = "?"
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                left = (await sandbox.exec(probe)).stdout.strip()
                if not left:
                    break
                await asyncio.sleep(0.2)
            assert not left, f"the cancelled command still runs 10 s later: {left}"
            assert (await sandbox.exec(["echo", "still here"])).stdout == "still here\n"

    run(main())


@pytest.mark.fake
def test_cancel_token_stops_calls_before_they_start(fake_client, workdir):
    token = odek.CancelToken()
    plan = fake_client.resolve(workdir, SHOP, cancel=token)
    token.cancel()
    assert token.cancelled
    with pytest.raises(odek.CancelledError) as ei:
        fake_client.launch(plan, cancel=token)
    assert ei.value.code == odek.CODES["CANCELLED"] and ei.value.failure_class == "cancelled"
    with pytest.raises(odek.CancelledError):
        fake_client.resolve(workdir, SHOP, cancel=token)
    token.close()
    with pytest.raises(odek.CancelledError):  # closed after the cancel: still cancelled
        fake_client.resolve(workdir, SHOP, cancel=token)
