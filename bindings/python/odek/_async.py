"""The asyncio API: :class:`AsyncClient`, :class:`AsyncSandbox` and
:func:`launch_async`, beside the blocking one.

libodek's calls block (the C ABI has no futures), so each
coroutine here runs the blocking call in a thread pool — the event loop's
default executor unless the client was given another — and awaits it; the
event loop keeps running meanwhile (ctypes releases the GIL). The objects
wrap a sync :class:`~odek.Client` / :class:`~odek.Sandbox` (``.sync``), so
results, errors and lifetimes are those of the sync API::

    async with odek.launch_async(".", {"sandbox_compose_project": "shop"}) as sandbox:
        result = await sandbox.exec(["redis-cli", "-h", "redis", "ping"], timeout=30)
    # leaving the block removed the container

Cancellation: each call is given a :class:`~odek.CancelToken`. When the
awaiting task is cancelled, ``asyncio.CancelledError`` is raised at once and
the token stops the call in libodek, in its thread: a cancelled
:meth:`AsyncSandbox.exec` kills its command (as its timeout would), a
cancelled :meth:`AsyncClient.launch` removes what it created. A sandbox that
a cancelled launch still produces (it finished just before, or
:func:`launch_async`, whose resolve-approve-launch sequence runs to its end)
is removed in its thread, so it never leaks.

The default executor has ``min(32, cpu_count + 4)`` threads; calls beyond
that wait for a free thread. Pass ``executor=`` to :class:`AsyncClient` (a
:class:`concurrent.futures.ThreadPoolExecutor`) to run more at once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import os
from types import TracebackType
from typing import (
    Any,
    Callable,
    Generator,
    Mapping,
    Optional,
    Sequence,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from ._cancel import CancelToken
from ._client import (
    ApprovalLike,
    Client,
    PathLike,
    PlanLike,
    Sandbox,
    _exec_request,
    _resolve_and_launch,
    _warn_launch,
)
from ._files import DirectoryListing, FileContent, FileEdited, FileWritten
from ._results import CloseResult, Description, ExecResult, SandboxInfo
from ._stream import AsyncExecStream
from ._types import Approval, Plan
from ._view import ConfigView

__all__ = ["AsyncClient", "AsyncSandbox", "launch_async"]

T = TypeVar("T")


async def _run(executor: Optional[concurrent.futures.Executor], fn: Callable[..., T], *args: Any,
               **kwargs: Any) -> T:
    """Runs ``fn(*args, **kwargs)`` in ``executor`` (the loop's default when None)."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, fn, *args, **kwargs)
    return await loop.run_in_executor(executor, call)


async def _run_cancellable(executor: Optional[concurrent.futures.Executor],
                           fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Like :func:`_run` for a call that takes ``cancel=``: when the awaiting
    task is cancelled, the call's :class:`~odek.CancelToken` stops it in
    libodek (an exec's command is killed)."""
    token = CancelToken()
    try:
        return await _run(executor, fn, *args, cancel=token, **kwargs)
    except asyncio.CancelledError:
        token.cancel()
        raise
    finally:
        token.close()  # a call already in libodek keeps its own reference


async def _run_owning(executor: Optional[concurrent.futures.Executor],
                      fn: Callable[..., Sandbox], *args: Any, cancellable: bool = False,
                      **kwargs: Any) -> Sandbox:
    """Like :func:`_run` for a call that returns a sandbox: when the awaiting
    task is cancelled, a sandbox the call still produces is closed in its
    thread instead of being lost. With ``cancellable`` the call is given
    ``cancel=`` too, and the launch is stopped in libodek (which removes what
    it created)."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    token = CancelToken() if cancellable else None
    if token is not None:
        kwargs["cancel"] = token
        close = token.close
    fut = loop.run_in_executor(executor, functools.partial(ctx.run, fn, *args, **kwargs))
    if token is not None:
        fut.add_done_callback(lambda _: close())
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        if token is not None:
            token.cancel()
        def reap(f: "asyncio.Future[Sandbox]") -> None:
            if f.cancelled() or f.exception() is not None:
                return
            sandbox = f.result()
            # close() blocks (removes the container): not on the loop's thread.
            try:
                loop.run_in_executor(executor, sandbox.close)
            except RuntimeError:  # the loop is closing: close here
                sandbox.close()

        fut.add_done_callback(reap)
        raise


class AsyncSandbox:
    """A launched sandbox for asyncio code; wraps a :class:`~odek.Sandbox`.

    Use ``async with`` (or ``await sandbox.close()``): leaving the block
    removes the container, even when the block raises. Properties that need
    no call (:attr:`name`, :attr:`info`, …) are plain attributes.
    """

    def __init__(self, sandbox: Sandbox, *, executor: Optional[concurrent.futures.Executor] = None
                 ) -> None:
        if not isinstance(sandbox, Sandbox):
            raise TypeError("AsyncSandbox wraps an odek.Sandbox")
        self._sync = sandbox
        self._executor = executor

    def __repr__(self) -> str:
        return f"Async{self._sync!r}"

    @property
    def sync(self) -> Sandbox:
        """The blocking :class:`~odek.Sandbox` this wraps (same handle)."""
        return self._sync

    @property
    def info(self) -> SandboxInfo:
        """As :attr:`odek.Sandbox.info`."""
        return self._sync.info

    @property
    def name(self) -> str:
        """The sandbox (container) name."""
        return self._sync.name

    @property
    def container_id(self) -> Optional[str]:
        """The container ID; ``None`` when commands run on the host."""
        return self._sync.container_id

    @property
    def isolation(self) -> str:
        """``"container"``, ``"fallback"`` or ``"off"``."""
        return self._sync.isolation

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._sync.closed

    async def describe(self) -> Description:
        """As :meth:`odek.Sandbox.describe`, awaited."""
        return await _run_cancellable(self._executor, self._sync.describe)

    async def exec(
        self,
        argv: Optional[Sequence[str]] = None,
        *,
        shell: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        workdir: Optional[str] = None,
    ) -> ExecResult:
        """As :meth:`odek.Sandbox.exec`, awaited: runs a command and returns
        its :class:`~odek.ExecResult` (a non-zero exit is not an exception).

        Raises:
            UsageError, DockerRejectedError, InvalidHandleError: as the sync call.
        """
        return await _run_cancellable(self._executor, self._sync.exec, argv, shell=shell, env=env,
                                      timeout=timeout, workdir=workdir)

    async def read_file(self, path: str, *, binary: bool = False, offset: Optional[int] = None,
                        length: Optional[int] = None) -> FileContent:
        """As :meth:`odek.Sandbox.read_file`, awaited."""
        return await _run_cancellable(self._executor, self._sync.read_file, path, binary=binary,
                                      offset=offset, length=length)

    async def write_file(self, path: str, content: Union[str, bytes]) -> FileWritten:
        """As :meth:`odek.Sandbox.write_file`, awaited."""
        return await _run_cancellable(self._executor, self._sync.write_file, path, content)

    async def edit_file(self, path: str,
                        edits: Sequence[Union[Tuple[str, str], Mapping[str, str]]]) -> FileEdited:
        """As :meth:`odek.Sandbox.edit_file`, awaited."""
        return await _run_cancellable(self._executor, self._sync.edit_file, path, edits)

    async def list_directory(self, path: str = ".") -> DirectoryListing:
        """As :meth:`odek.Sandbox.list_directory`, awaited."""
        return await _run_cancellable(self._executor, self._sync.list_directory, path)

    def exec_stream(
        self,
        argv: Optional[Sequence[str]] = None,
        *,
        shell: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        workdir: Optional[str] = None,
        cancel: Optional[CancelToken] = None,
        stdin: Union[bytes, bool, None] = None,
    ) -> AsyncExecStream:
        """As :meth:`odek.Sandbox.exec_stream`, for ``async for``: starts
        the command now (call it from a coroutine: it needs the running
        loop) and returns an :class:`~odek.AsyncExecStream` of
        :class:`~odek.OutputChunk` values; ``result`` once it ended::

            async with sandbox.exec_stream(shell="make", timeout=600) as run:
                async for chunk in run:
                    print(chunk.stream, chunk.data)
            print(run.result.exit_code)

        Not a coroutine itself: the chunks reach the event loop from a
        thread of the stream's own (not the executor). Cancelling the task
        that iterates kills the command. ``stdin`` as the sync call's
        (``bytes``, or ``True`` for :meth:`~odek.AsyncExecStream.write` and
        :meth:`~odek.AsyncExecStream.close_stdin`, which never block the
        loop); without odek's supervisor the stream raises
        :class:`DockerRejectedError` (402) and nothing runs.

        Raises:
            MissingFunctionError, UsageError, InvalidHandleError: as the sync call.
        """
        req = _exec_request(argv, shell, env, timeout, workdir)
        return AsyncExecStream(self._sync, req, cancel, None if stdin is False else stdin)

    async def close(self) -> CloseResult:
        """As :meth:`odek.Sandbox.close`, awaited: removes the container,
        frees the handle and returns the :class:`~odek.CloseResult` (the
        files host tools run that the sandbox changed); idempotent."""
        if not self._sync.closed:
            return await _run(self._executor, self._sync.close)
        return self._sync.close()

    destroy = close

    @property
    def close_result(self) -> Optional[CloseResult]:
        """As :attr:`odek.Sandbox.close_result`."""
        return self._sync.close_result

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        # The sync __exit__ keeps the block's exception when closing fails too.
        await _run(self._executor, self._sync.__exit__, exc_type, exc, tb)


class AsyncClient:
    """A :class:`~odek.Client` for asyncio code. Creating it makes no
    connection (it does not block); every verb that may talk to Docker is a
    coroutine.

    Args:
        docker_host, docker_cert_path, engine, sandbox_pool: as
            :class:`odek.Client`.
        executor: where the blocking calls run; default the event loop's
            default executor.
        client: wrap this existing :class:`~odek.Client` instead of making
            one (``docker_host``/``docker_cert_path``/``engine``/``sandbox_pool`` must then be
            unset); closing the
            async client closes it.
    """

    def __init__(
        self,
        *,
        docker_host: Optional[str] = None,
        engine: Optional[str] = None,
        executor: Optional[concurrent.futures.Executor] = None,
        client: Optional[Client] = None,
        sandbox_pool: Optional[int] = None,
        docker_cert_path: Optional[str] = None,
    ) -> None:
        if client is not None:
            if (
                docker_host is not None
                or docker_cert_path is not None
                or engine is not None
                or sandbox_pool is not None
            ):
                raise TypeError(
                    "pass either client= or docker_host=/docker_cert_path=/engine=/sandbox_pool=, "
                    "not both"
                )
            self._sync = client
        else:
            self._sync = Client(
                docker_host=docker_host,
                engine=engine,
                sandbox_pool=sandbox_pool,
                docker_cert_path=docker_cert_path,
            )
        self._executor = executor

    def __repr__(self) -> str:
        return f"Async{self._sync!r}"

    @property
    def sync(self) -> Client:
        """The blocking :class:`~odek.Client` this wraps."""
        return self._sync

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._sync.closed

    async def resolve(
        self,
        workdir: PathLike,
        settings: Optional[Mapping[str, Any]] = None,
        *,
        read_user_config: bool = True,
        read_project_config: bool = True,
        env: Optional[Mapping[str, str]] = None,
        allow_host_fallback: bool = False,
    ) -> Plan:
        """As :meth:`odek.Client.resolve`, awaited."""
        return await _run_cancellable(self._executor, self._sync.resolve, workdir, settings,
                          read_user_config=read_user_config,
                          read_project_config=read_project_config, env=env,
                          allow_host_fallback=allow_host_fallback)

    async def approve(self, plan: PlanLike, decision: str = "once") -> Approval:
        """As :meth:`odek.Client.approve`, awaited (``"trust"`` writes a file)."""
        return await _run(self._executor, self._sync.approve, plan, decision)

    async def launch(self, plan: PlanLike, approval: ApprovalLike = None) -> AsyncSandbox:
        """As :meth:`odek.Client.launch`, awaited; a sandbox launched after the
        awaiting task was cancelled is removed, not leaked. Its warnings
        (:class:`~odek.OdekWarning`, :class:`~odek.HostFallbackWarning`) are
        emitted in the event loop's thread, pointing at the awaiting code."""
        sandbox = await _run_owning(self._executor, self._sync._launch, plan, approval,
                                    cancellable=True)
        _warn_launch(sandbox, stacklevel=2)
        return AsyncSandbox(sandbox, executor=self._executor)

    async def config_view(self, plan: PlanLike) -> ConfigView:
        """As :meth:`odek.Client.config_view`, awaited."""
        return await _run_cancellable(self._executor, self._sync.config_view, plan)

    async def close(self) -> None:
        """Frees the client; idempotent. Sandboxes it launched stay usable."""
        if not self._sync.closed:
            await _run(self._executor, self._sync.close)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await _run(self._executor, self._sync.__exit__, exc_type, exc, tb)


class _Launching:
    """What :func:`launch_async` returns: await it for an :class:`AsyncSandbox`,
    or use it directly in ``async with`` (the sandbox is closed on exit)."""

    def __init__(self, start: Callable[[], "asyncio.Future[AsyncSandbox]"]) -> None:
        self._start = start
        self._sandbox: Optional[AsyncSandbox] = None

    # The launch runs as its own task; its warnings are emitted here, in the
    # loop's thread, pointing at the awaiting code.

    def __await__(self) -> Generator[Any, None, AsyncSandbox]:
        sandbox = yield from self._start().__await__()
        _warn_launch(sandbox.sync, stacklevel=2)
        return sandbox

    async def __aenter__(self) -> AsyncSandbox:
        self._sandbox = await self._start()
        _warn_launch(self._sandbox.sync, stacklevel=2)
        return self._sandbox

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        sandbox, self._sandbox = self._sandbox, None
        if sandbox is not None:
            await sandbox.__aexit__(exc_type, exc, tb)


def launch_async(
    workdir: PathLike,
    settings: Optional[Mapping[str, Any]] = None,
    *,
    approve: Optional[str] = None,
    client: Union[AsyncClient, Client, None] = None,
    read_user_config: bool = True,
    read_project_config: bool = True,
    env: Optional[Mapping[str, str]] = None,
    allow_host_fallback: bool = False,
    executor: Optional[concurrent.futures.Executor] = None,
) -> _Launching:
    """:func:`odek.launch` for asyncio: resolve, approve if asked, launch.

    ::

        async with odek.launch_async(".", {"sandbox_compose_project": "shop"}) as sandbox:
            print((await sandbox.exec(["redis-cli", "-h", "redis", "ping"])).stdout)

        sandbox = await odek.launch_async(".")    # or own it: await sandbox.close()

    Arguments are those of :func:`odek.launch`; ``client`` may be an
    :class:`AsyncClient` or a :class:`~odek.Client` (default: a temporary
    client). ``executor``: where the blocking calls run (default: the
    client's, else the loop's default executor).

    Raises:
        OdekError: as :func:`odek.launch`, when awaited.
    """
    if approve not in (None, "once", "trust"):
        raise ValueError(f'approve must be None, "once" or "trust" (got {approve!r})')
    sync_client: Optional[Client]
    if isinstance(client, AsyncClient):
        sync_client = client.sync
        executor = executor if executor is not None else client._executor
    else:
        sync_client = client
    path = os.fspath(workdir)

    async def start() -> AsyncSandbox:
        sandbox = await _run_owning(
            executor, _resolve_and_launch, path, settings, approve=approve,
            client=sync_client, read_user_config=read_user_config,
            read_project_config=read_project_config, env=env,
            allow_host_fallback=allow_host_fallback,
        )
        return AsyncSandbox(sandbox, executor=executor)

    return _Launching(lambda: asyncio.ensure_future(start()))
