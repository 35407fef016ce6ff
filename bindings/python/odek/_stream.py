"""Streaming exec: a command's output as it comes (``odek_exec_stream``).

:meth:`odek.Sandbox.exec_stream` returns an :class:`ExecStream`, an iterator
of :class:`OutputChunk` — ``(stream, data)``, ``stream`` being ``"stdout"``
or ``"stderr"`` and ``data`` the raw bytes — that ends when the command
does; its :attr:`~ExecStream.result` is then the :class:`~odek.ExecResult`
:meth:`odek.Sandbox.exec` would have returned (exit code, timeout, the
output again as text, at most 16 MiB of each stream)::

    with sandbox.exec_stream(shell="make test", timeout=600) as run:
        for chunk in run:
            sys.stdout.buffer.write(chunk.data) if chunk.stream == "stdout" else log(chunk.data)
    print(run.result.exit_code)

:meth:`odek.AsyncSandbox.exec_stream` returns an :class:`AsyncExecStream`,
the same for ``async for``.

The command starts at once, when ``exec_stream`` is called, and runs to its
end whether or not the chunks are read: they wait in memory (every byte the
command writes, until read) — read them, or close the stream. Closing a
stream before the command ended (:meth:`ExecStream.close`, leaving its
``with`` block, or dropping it) cancels the command: it is killed as its
timeout would kill it. How it runs: a thread of its own calls
``odek_exec_stream``, whose callback (on that thread) queues each chunk.
A libodek older than the binding lacks that function:
:class:`~odek.MissingFunctionError`, raised by ``exec_stream`` before
anything runs.
"""

from __future__ import annotations

import asyncio
import ctypes
import queue
import threading
from typing import Any, Callable, NamedTuple, Optional, cast

from . import _cancel, _ffi
from ._cancel import CancelToken
from ._results import ExecResult

__all__ = ["OutputChunk", "ExecStream", "AsyncExecStream"]


class OutputChunk(NamedTuple):
    """One piece of a command's output, as odek received it.

    A line may be split across chunks and a chunk may hold several lines;
    each stream's chunks come in order.

    Attributes:
        stream (str): ``"stdout"`` or ``"stderr"`` (odek's own notes about
            the command, such as a kill it could not confirm, come on
            ``"stderr"`` too, as in :attr:`ExecResult.stderr`).
        data (bytes): the bytes, raw (not decoded).
    """

    stream: str
    data: bytes


_STREAMS = {_ffi.STREAM_STDOUT: "stdout", _ffi.STREAM_STDERR: "stderr"}

# Queue items: ("chunk", OutputChunk) …, then ("done", ExecResult) or
# ("error", exception).
_Put = Callable[[Any], None]


class _Call:
    """One ``odek_exec_stream`` call on a thread of its own, delivering its
    items through ``put`` (never referencing the stream object, so dropping
    that object can cancel the call)."""

    def __init__(self, sandbox: Any, request: bytes, cancel: Optional[CancelToken],
                 put: _Put, stdin: Any = None) -> None:
        # stdin: None (no stdin), True (written with write/close_stdin),
        # or bytes (written, then closed).
        if stdin is not None and stdin is not True and not isinstance(stdin, (bytes, bytearray)):
            raise TypeError("stdin must be bytes or True")
        fn = _ffi.require("odek_exec_stream_stdin" if stdin is not None else "odek_exec_stream")
        handle = sandbox._handle()
        self.stdin: Any = None
        if stdin is not None:
            self.stdin = _ffi.require("odek_stdin_new")()
            if not self.stdin:
                raise _ffi.LibraryError("odek_stdin_new failed (a forked process?)")
            if stdin is not True:
                self.write(bytes(stdin))
                self.close_stdin()
        pipe = self.stdin
        self.token = cancel if cancel is not None else CancelToken()
        own = cancel is None
        token_arg = _cancel.arg(self.token)
        token = self.token

        def on_output(_user: Any, stream: int, data: Any, n: int) -> None:
            try:
                put(("chunk", OutputChunk(_STREAMS.get(stream, str(stream)),
                                          ctypes.string_at(data, n))))
            except BaseException:  # noqa: BLE001 (nothing may leave a C callback)
                pass

        callback = _ffi.OutputFn(on_output)

        def work() -> None:
            # The sandbox and the callback stay referenced for the whole call.
            keep = (sandbox, callback)
            out = _ffi.OwnedStr()
            try:
                if pipe is not None:
                    err = fn(handle, request, token_arg, pipe, callback, None, ctypes.byref(out))
                else:
                    err = fn(handle, request, token_arg, callback, None, ctypes.byref(out))
                _ffi.check(err)
                item: Any = ("done", ExecResult.from_json(_ffi.take_string(out)))
            except BaseException as e:  # noqa: BLE001 (delivered to the reader)
                item = ("error", e)
            finally:
                if own:
                    token.close()
                if pipe is not None:
                    try:
                        _ffi.check(_ffi.require("odek_stdin_free")(pipe))
                    except BaseException:  # noqa: BLE001 (freed once; nothing to report to)
                        pass
                del keep
            try:
                put(item)
            except BaseException:  # noqa: BLE001 (the reader is gone: asyncio loop closed)
                pass

        self.thread = threading.Thread(target=work, name="odek-exec-stream", daemon=True)
        self.thread.start()

    def cancel(self) -> None:
        """Cancels the command unless the call already ended (a closed
        token only records it)."""
        self.token.cancel()

    def write(self, data: bytes) -> None:
        """Queues ``data`` for the command's stdin (does not block)."""
        if self.stdin is None:
            raise RuntimeError("this command was started without stdin (exec_stream(stdin=True))")
        _ffi.check(_ffi.require("odek_stdin_write")(self.stdin, bytes(data), len(data)))

    def close_stdin(self) -> None:
        """Ends the command's stdin after what was written; idempotent."""
        if self.stdin is None:
            raise RuntimeError("this command was started without stdin (exec_stream(stdin=True))")
        _ffi.check(_ffi.require("odek_stdin_close")(self.stdin))


class ExecStream:
    """The output of a running command, chunk by chunk
    (:meth:`odek.Sandbox.exec_stream`).

    Iterate it for :class:`OutputChunk` values; the iteration ends when the
    command ends, and :attr:`result` is then its :class:`~odek.ExecResult`.
    A failure of the exec itself (the sandbox stopped, the call was
    cancelled, …) is raised by the iteration after the chunks that came
    before it, and by :attr:`result`. Use it in a ``with`` block or call
    :meth:`close`: closing it before the command ended kills the command.
    """

    def __init__(self, sandbox: Any, request: bytes, cancel: Optional[CancelToken],
                 stdin: Any = None) -> None:
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._call = _Call(sandbox, request, cancel, self._queue.put, stdin)
        self._end: Optional[Any] = None

    def write(self, data: bytes) -> None:
        """Writes ``data`` to the command's stdin (started with
        ``stdin=True``); does not block.

        Raises:
            RuntimeError: the command was started without stdin.
            InvalidArgumentError: stdin was closed, or the command ended.
        """
        self._call.write(data)

    def close_stdin(self) -> None:
        """Closes the command's stdin after what was written (it reads
        end-of-file); idempotent."""
        self._call.close_stdin()

    def __repr__(self) -> str:
        return f"ExecStream({'ended' if self._end is not None else 'running'})"

    def __iter__(self) -> "ExecStream":
        return self

    def __next__(self) -> OutputChunk:
        if self._end is not None:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == "chunk":
            return cast(OutputChunk, value)
        self._end = (kind, value)
        if kind == "error":
            raise value
        raise StopIteration

    @property
    def done(self) -> bool:
        """True once the iteration reached the command's end."""
        return self._end is not None

    @property
    def result(self) -> ExecResult:
        """The command's :class:`~odek.ExecResult` (what
        :meth:`odek.Sandbox.exec` returns), once the iteration ended.

        Raises:
            RuntimeError: the chunks were not all read yet (iterate to the
                end, or call :meth:`wait`).
            OdekError: the exec failed (as :meth:`odek.Sandbox.exec` would raise).
        """
        if self._end is None:
            raise RuntimeError(
                "the command's result is known once every chunk was read: iterate the "
                "stream to its end or call wait()"
            )
        kind, value = self._end
        if kind == "error":
            raise value
        return cast(ExecResult, value)

    def wait(self) -> ExecResult:
        """Reads (and drops) the chunks not read yet, waits for the command's
        end and returns :attr:`result`."""
        for _ in self:
            pass
        return self.result

    def close(self) -> None:
        """Kills the command if it still runs (as its timeout would) and
        waits for the call to return; idempotent. Chunks not read are dropped."""
        if self._end is None:
            self._call.cancel()
        self._call.thread.join()
        while self._end is None:
            try:
                next(self)
            except StopIteration:
                break
            except BaseException:  # noqa: BLE001 (the cancellation's own error)
                break

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        # Dropped unread: the command is killed rather than left running.
        if getattr(self, "_end", True) is None:
            self._call.cancel()


class AsyncExecStream:
    """:class:`ExecStream` for asyncio (:meth:`odek.AsyncSandbox.exec_stream`):
    ``async for chunk in stream``, then :attr:`result`.

    The chunks are handed to the event loop as they come; the loop is never
    blocked. When the task iterating is cancelled, the command is killed.
    Use ``async with`` or ``await stream.aclose()``.
    """

    def __init__(self, sandbox: Any, request: bytes, cancel: Optional[CancelToken],
                 stdin: Any = None) -> None:
        loop = asyncio.get_running_loop()
        self._queue: "asyncio.Queue[Any]" = asyncio.Queue()
        q = self._queue

        def put(item: Any) -> None:
            loop.call_soon_threadsafe(q.put_nowait, item)

        self._call = _Call(sandbox, request, cancel, put, stdin)
        self._end: Optional[Any] = None

    def write(self, data: bytes) -> None:
        """As :meth:`ExecStream.write` (started with ``stdin=True``); does
        not block, so it may be called from the event loop."""
        self._call.write(data)

    def close_stdin(self) -> None:
        """As :meth:`ExecStream.close_stdin`; idempotent."""
        self._call.close_stdin()

    def __repr__(self) -> str:
        return f"AsyncExecStream({'ended' if self._end is not None else 'running'})"

    def __aiter__(self) -> "AsyncExecStream":
        return self

    async def __anext__(self) -> OutputChunk:
        if self._end is not None:
            raise StopAsyncIteration
        try:
            kind, value = await self._queue.get()
        except asyncio.CancelledError:
            self._call.cancel()
            raise
        if kind == "chunk":
            return cast(OutputChunk, value)
        self._end = (kind, value)
        if kind == "error":
            raise value
        raise StopAsyncIteration

    @property
    def done(self) -> bool:
        """True once the iteration reached the command's end."""
        return self._end is not None

    @property
    def result(self) -> ExecResult:
        """As :attr:`ExecStream.result`."""
        if self._end is None:
            raise RuntimeError(
                "the command's result is known once every chunk was read: iterate the "
                "stream to its end or await wait()"
            )
        kind, value = self._end
        if kind == "error":
            raise value
        return cast(ExecResult, value)

    async def wait(self) -> ExecResult:
        """Reads (and drops) the chunks not read yet and returns :attr:`result`."""
        async for _ in self:
            pass
        return self.result

    async def aclose(self) -> None:
        """Kills the command if it still runs and waits for the call's end;
        idempotent."""
        if self._end is None:
            self._call.cancel()
        while self._end is None:
            try:
                await self.__anext__()
            except StopAsyncIteration:
                break
            except asyncio.CancelledError:
                raise
            except BaseException:  # noqa: BLE001 (the cancellation's own error)
                break

    async def __aenter__(self) -> "AsyncExecStream":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __del__(self) -> None:
        if getattr(self, "_end", True) is None:
            self._call.cancel()
