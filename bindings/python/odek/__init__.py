"""odek — Docker sandboxes for AI coding agents (Python binding over the C ABI).

The four verbs — resolve, approve, launch, describe — plus exec, narrow,
config view and destroy (SPEC §10.1), over ``libodek.so`` through ctypes::

    import odek

    with odek.Client() as client:
        plan = client.resolve("/path/to/project", {"sandbox_compose_project": "myapp"})
        approval = client.approve(plan, "once") if plan.approval_request else None
        with client.launch(plan, approval) as sandbox:
            system_prompt = "You are a coding agent.\\n\\n" + sandbox.describe().prompt
            result = sandbox.exec(["redis-cli", "-h", "redis", "ping"], timeout=30)
            print(result.exit_code, result.stdout)
    # leaving the with block removed the container

Or in one call: ``with odek.launch(workdir=".", settings={...}) as sandbox: ...``.

asyncio: :class:`AsyncClient`, :class:`AsyncSandbox` and :func:`launch_async`
mirror the blocking API with coroutines (the blocking calls run in a thread
pool; see :mod:`odek._async`)::

    async with odek.launch_async(".", {"sandbox_compose_project": "myapp"}) as sandbox:
        result = await sandbox.exec(["redis-cli", "-h", "redis", "ping"], timeout=30)

Output as it comes: :meth:`Sandbox.exec_stream` returns an iterator of
:class:`OutputChunk` ``(stream, data)`` with the :class:`ExecResult` as its
``result`` at the end, and :meth:`AsyncSandbox.exec_stream` the same for
``async for`` (see :mod:`odek._stream`)::

    with sandbox.exec_stream(shell="make test") as run:
        for chunk in run:
            print(chunk.stream, chunk.data)
    print(run.result.exit_code)

A sandbox is required by default: an unreachable daemon or an image that
cannot be pulled raises instead of falling back to the host. Pass
``allow_host_fallback=True`` for SPEC §6.3's implicit mode; a fallback then
emits :class:`HostFallbackWarning`.

Failures raise :class:`OdekError` subclasses by failure class (SPEC §6.3):
:class:`UsageError`, :class:`ConfigError` (and :class:`ApprovalError`),
:class:`DockerRejectedError`, :class:`ImageUnavailableError`,
:class:`DaemonUnreachableError`, and :class:`CancelledError` for a cancelled call.

After ``os.fork()`` (or a ``multiprocessing`` child started with the
``fork`` method) in a process that used odek, the child cannot use odek:
every call raises :class:`ForkedError` at once and touches nothing of the
parent's, which keeps working. Start such children with the ``spawn`` or
``forkserver`` method.

The library is the ``libodek.so`` bundled in this package (an installed
wheel carries it); ``ODEK_LIB`` (a path to a ``libodek.so``) overrides it, and
a source checkout falls back to its ``target/`` directory; see :mod:`odek._ffi`. It is loaded on first use and its ABI version checked.
"""

from __future__ import annotations

from ._async import AsyncClient, AsyncSandbox, launch_async
from ._cancel import CancelToken
from ._client import (
    Client,
    HostFallbackWarning,
    HostFilesChangedWarning,
    OdekWarning,
    Sandbox,
    launch,
    narrow,
)
from ._errors import (
    CODE_NAMES,
    CODES,
    ApprovalError,
    ApprovalRequiredError,
    ConfigError,
    DaemonUnreachableError,
    CancelledError,
    DockerRejectedError,
    FileError,
    ForkedError,
    ImageUnavailableError,
    InvalidHandleError,
    OdekError,
    UsageError,
)
from ._ffi import (
    ABI_VERSION,
    EXEC_OUTPUT_LIMIT,
    AbiVersionError,
    LibraryError,
    MissingFunctionError,
    abi_version,
    library_path,
    version,
)
from ._files import (
    FILE_READ_LIMIT,
    FILE_WRITE_LIMIT,
    DirectoryListing,
    DirEntry,
    FileContent,
    FileEdited,
    FileWritten,
)
from ._results import (
    CloseResult,
    CopiedBack,
    Description,
    EnvironmentNetwork,
    ExecResult,
    HostFileChange,
    Peer,
    SandboxInfo,
)
from ._stream import AsyncExecStream, ExecStream, OutputChunk
from ._types import Approval, ApprovalRequest, EnvKey, Network, Plan, PlanWarning
from ._view import ConfigView

__version__ = "0.1.0"

__all__ = [
    "HostFallbackWarning",
    "HostFilesChangedWarning",
    "OdekWarning",
    "ABI_VERSION",
    "EXEC_OUTPUT_LIMIT",
    "CODES",
    "CODE_NAMES",
    "Client",
    "Sandbox",
    "launch",
    "narrow",
    "AsyncClient",
    "AsyncSandbox",
    "launch_async",
    "abi_version",
    "version",
    "library_path",
    "Plan",
    "PlanWarning",
    "Network",
    "EnvKey",
    "ApprovalRequest",
    "Approval",
    "Description",
    "EnvironmentNetwork",
    "Peer",
    "ExecResult",
    "ExecStream",
    "AsyncExecStream",
    "OutputChunk",
    "ConfigView",
    "SandboxInfo",
    "CloseResult",
    "CopiedBack",
    "HostFileChange",
    "OdekError",
    "UsageError",
    "InvalidHandleError",
    "ForkedError",
    "ConfigError",
    "FileError",
    "FILE_READ_LIMIT",
    "FILE_WRITE_LIMIT",
    "FileContent",
    "FileWritten",
    "FileEdited",
    "DirEntry",
    "DirectoryListing",
    "ApprovalError",
    "ApprovalRequiredError",
    "DockerRejectedError",
    "ImageUnavailableError",
    "DaemonUnreachableError",
    "CancelledError",
    "CancelToken",
    "LibraryError",
    "AbiVersionError",
    "MissingFunctionError",
]
