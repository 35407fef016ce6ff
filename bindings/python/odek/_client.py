"""Client and Sandbox: the verbs of SPEC §10.1 over the C ABI."""

from __future__ import annotations

import ctypes
import json as _json
import math
import os
import warnings
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _cancel, _ffi
from ._cancel import CancelToken
from ._errors import CODES, UsageError
from ._managed import Managed
from ._results import CloseResult, Description, ExecResult, SandboxInfo
from ._types import Approval, ApprovalRequest, Plan
from ._view import ConfigView

if TYPE_CHECKING:
    from ._files import DirectoryListing, FileContent, FileEdited, FileWritten
    from ._stream import ExecStream

__all__ = ["Client", "Sandbox", "launch", "narrow"]

PathLike = Union[str, "os.PathLike[str]"]
PlanLike = Union[Plan, str]
ApprovalLike = Union[Approval, str, None]


def _dumps(value: Any, what: str) -> bytes:
    """JSON for the library: UTF-8, no NaN/Infinity (not JSON)."""
    try:
        text = _json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from e
    return _ffi.cstr(text, what)


def _plan_json(plan: PlanLike) -> bytes:
    if isinstance(plan, Plan):
        return _ffi.cstr(plan.json, "plan")
    if isinstance(plan, str):
        return _ffi.cstr(plan, "plan")
    raise TypeError(f"plan must be an odek.Plan or its JSON str, not {type(plan).__name__}")


def _approval_json(approval: ApprovalLike) -> bytes:
    if approval is None:
        return b"null"
    if isinstance(approval, Approval):
        return _ffi.cstr(approval.json, "approval")
    if isinstance(approval, str):
        return _ffi.cstr(approval, "approval")
    raise TypeError(
        f"approval must be an odek.Approval, its JSON str or None, not {type(approval).__name__}"
    )


def _str_map(value: Optional[Mapping[str, str]], what: str) -> Optional[Dict[str, str]]:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a mapping of str to str")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"{what} must map str to str (got {k!r}: {type(v).__name__})")
        out[k] = v
    return out


class Client(Managed[Any]):
    """A connection configuration to a Docker engine (``odek_client_t``).

    No connection is made until a call needs the daemon. A client may be used
    from several threads at once. Sandboxes launched from a client stay usable
    after the client is closed.

    Args:
        docker_host (str | None): ``"unix:///path/docker.sock"``,
            ``"tcp://host:port"`` or ``"ssh://[user@]host[:port]"``; default:
            ``DOCKER_HOST``, the current Docker context, then the usual
            sockets (SPEC §6.2).
        docker_cert_path (str | None): with a ``tcp://`` ``docker_host``, the
            absolute path of the directory of ``ca.pem``, ``cert.pem`` and ``key.pem``: the daemon
            is reached over TLS and its certificate verified (SPEC §6.2.1);
            default: plain TCP.
        engine (str | None): ``"docker"`` (default) or ``"fake"`` — an
            in-memory engine for tests with image ``odek-test/base:1`` and a
            Compose project ``shop`` (networks ``shop_default`` and internal
            ``shop_backend``).
        sandbox_pool (int | None): the client's warm pool: keep this many
            sandboxes ready (0–8; default 0, none) for each plan it
            launched. :meth:`launch` then hands over a ready sandbox of
            exactly its plan, after the approval re-check and the
            inspect-verify a launch does (a failing one is removed and a
            fresh one launched), and starts a replacement in the background;
            :meth:`close` removes the ready ones (docs/SANDBOXING.md, "The
            warm pool").

    Raises:
        ConfigError: ``docker_host`` is invalid, or ``docker_cert_path`` is
            given without a ``tcp://`` ``docker_host`` or its files fail their
            check (``ODEK_E_ENDPOINT``, naming the file and the fix).
        UsageError: an unknown ``engine``, a ``sandbox_pool`` above 8.

    Use it as a context manager, or call :meth:`close`::

        with odek.Client() as client:
            plan = client.resolve("/path/to/project", {"sandbox_compose_project": "myapp"})
    """

    _kind = "client"

    def __init__(
        self,
        *,
        docker_host: Optional[str] = None,
        engine: Optional[str] = None,
        sandbox_pool: Optional[int] = None,
        docker_cert_path: Optional[str] = None,
    ) -> None:
        options: Dict[str, Any] = {}
        if docker_host is not None:
            options["docker_host"] = docker_host
        if docker_cert_path is not None:
            options["docker_cert_path"] = docker_cert_path
        if engine is not None:
            options["engine"] = engine
        if sandbox_pool is not None:
            options["sandbox_pool"] = sandbox_pool
        L = _ffi.lib()
        out = _ffi.ClientPtr()
        _ffi.check(L.odek_client_new(_dumps(options, "client options"), ctypes.byref(out)))
        self._set_handle(out)
        self._options = options

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        opts = ", ".join(f"{k}={v!r}" for k, v in self._options.items())
        return f"Client({opts}) [{state}]"

    def _free(self, ptr: Any) -> None:
        _ffi.check(_ffi.lib().odek_client_free(ptr))

    # --- verbs --------------------------------------------------------------------

    def resolve(
        self,
        workdir: PathLike,
        settings: Optional[Mapping[str, Any]] = None,
        *,
        read_user_config: bool = True,
        read_project_config: bool = True,
        env: Optional[Mapping[str, str]] = None,
        allow_host_fallback: bool = False,
        cancel: Optional[CancelToken] = None,
    ) -> Plan:
        """Resolves configuration, networks and image into a plan (SPEC §3–§5).

        Blocks (talks to Docker); other Python threads keep running.

        Args:
            workdir (str | PathLike): the project directory, mounted at
                ``/workspace``; relative paths are taken from the current directory.
            settings (dict | None): operator settings — config keys of SPEC §3.1
                as in ``odek.json`` (``sandbox_image``, ``sandbox_compose_project``,
                ``sandbox_pids_limit`` …) — with the highest precedence.
            read_user_config (bool): read ``$ODEK_HOME/config.json``.
            read_project_config (bool): read ``<workdir>/odek.json``.
            env (dict[str, str] | None): the whole environment to read
                ``ODEK_*``, ``ODEK_HOME``/``HOME`` and ``${…}`` from, replacing
                the process's (extend it with ``{**os.environ, "K": "v"}``).
            allow_host_fallback (bool): the default (``False``) requires a
                sandbox: unless ``settings`` says ``"sandbox"`` itself, the
                library sets it to ``True`` (the resolve request's
                ``allow_host_fallback``, decided in libodek), so an
                unreachable daemon or an image that cannot be pulled raises
                instead of handing the agent a host shell. ``True`` keeps
                SPEC §6.3's implicit mode (loud fallback to the host;
                :class:`HostFallbackWarning`).

        Returns:
            Plan: check :attr:`Plan.approval_request` before launching.

        Raises:
            ConfigError: invalid settings, unresolvable networks, a Compose
                project that is not running … (2xx); an unreadable approval store (303).
            DaemonUnreachableError: no daemon and no fallback allowed (6xx).
            DockerRejectedError: the engine refused a lookup (4xx).
            InvalidHandleError: the client was closed.
        """
        req: Dict[str, Any] = {
            "workdir": os.path.abspath(os.fspath(workdir)),
            "read_user_config": bool(read_user_config),
            "read_project_config": bool(read_project_config),
        }
        if settings is not None and not isinstance(settings, Mapping):
            raise TypeError("settings must be a mapping of config keys to values")
        if settings:
            req["settings"] = dict(settings)
        if allow_host_fallback:
            req["allow_host_fallback"] = True
        e = _str_map(env, "env")
        if e is not None:
            req["env"] = e
        h = self._handle()
        return Plan(_ffi.call_str(
            "odek_resolve_cancellable", h, _dumps(req, "resolve request"), _cancel.arg(cancel)
        ))

    def approval_request(self, plan: PlanLike) -> Optional[ApprovalRequest]:
        """What the operator must approve before ``plan`` launches, or ``None``.

        Same as :attr:`Plan.approval_request`. Does not block.
        """
        return (plan if isinstance(plan, Plan) else Plan(plan)).approval_request

    def approve(self, plan: PlanLike, decision: str = "once") -> Approval:
        """Approves a plan's project settings (SPEC §7).

        Args:
            plan (Plan | str): a plan whose :attr:`~Plan.approval_request` is set.
            decision (str): ``"once"`` (this launch) or ``"trust"`` (persisted in
                ``$ODEK_HOME/project_sandbox_approvals.json`` before anything is
                granted).

        Returns:
            Approval: pass it to :meth:`launch`.

        Raises:
            ApprovalError: the plan needs no approval (301), or the store
                cannot be written (303; nothing is granted).
            UsageError: ``decision`` is neither ``"once"`` nor ``"trust"``.
        """
        h = self._handle()
        text = _ffi.call_str(
            "odek_approve", h, _plan_json(plan), _ffi.cstr(decision, "decision")
        )
        return Approval.from_json(text)

    def launch(self, plan: PlanLike, approval: ApprovalLike = None, *,
               cancel: Optional[CancelToken] = None) -> "Sandbox":
        """Launches a sandbox from a plan (SPEC §6) — or refuses, leaving no container.

        Re-checks approved networks (§7.4), ensures the image, creates,
        starts, connects and verifies the container. Blocks.

        Args:
            plan (Plan | str): from :meth:`resolve` or :func:`narrow`.
            approval (Approval | str | None): from :meth:`approve`; ``None``
                when the plan needs none.
            cancel (CancelToken | None): :meth:`CancelToken.cancel` stops the
                launch, which removes what it created and raises
                :class:`CancelledError`.

        Returns:
            Sandbox: use it in a ``with`` block so the container is always removed.

        Warns:
            OdekWarning: once for each warning of the plan and the launch
                (``sandbox.info.warnings``), e.g. an attached network that is
                not internal, so the sandbox can reach the internet (SPEC §4.3).
            HostFallbackWarning: commands will run on the host (SPEC §6.3).

        Raises:
            ApprovalRequiredError: the plan needs an approval (300); other
                ApprovalError: mismatch (301), networks changed (302).
            DockerRejectedError: create/start/connect/verify failed (4xx).
            ImageUnavailableError: the image cannot be pulled (explicit mode, 5xx).
            DaemonUnreachableError: the daemon is gone (explicit mode, 6xx).
        """
        sandbox = self._launch(plan, approval, cancel=cancel)
        _warn_launch(sandbox, stacklevel=2)
        return sandbox

    def _launch(self, plan: PlanLike, approval: ApprovalLike = None, *,
                cancel: Optional[CancelToken] = None) -> "Sandbox":
        """:meth:`launch` without emitting its warnings (the asyncio API
        emits them in the event loop's thread)."""
        h = self._handle()
        out = _ffi.SandboxPtr()
        _ffi.check(
            _ffi.lib().odek_launch_cancellable(
                h, _plan_json(plan), _approval_json(approval), _cancel.arg(cancel), ctypes.byref(out)
            )
        )
        return Sandbox._adopt(out)

    def config_view(self, plan: PlanLike, *, cancel: Optional[CancelToken] = None) -> ConfigView:
        """The settings ``plan`` actually applies, with sources (SPEC §10.4).

        Looks the image up locally when the daemon answers. Blocks.
        """
        h = self._handle()
        return ConfigView.from_json(
            _ffi.call_str("odek_config_view_cancellable", h, _plan_json(plan), _cancel.arg(cancel))
        )

    def narrow(self, parent_plan: PlanLike, **request: Any) -> Plan:
        """A sub-agent's plan narrowed from ``parent_plan``; see :func:`odek.narrow`."""
        return narrow(parent_plan, **request)


class HostFallbackWarning(RuntimeWarning):
    """A launch fell back to running commands on the host (SPEC §6.3)."""


class HostFilesChangedWarning(UserWarning):
    """Closing a sandbox found that it changed files host tools run (a git
    hook, ``.git/config``, ``.envrc``, ``.vscode/tasks.json``, a Makefile,
    ``package.json``, ``.pre-commit-config.yaml``), or could not tell:
    emitted by :meth:`Sandbox.close` (and so at the end of a ``with``
    block) with the one-line report; the same is in the returned
    :class:`CloseResult`. Review those files before running git or make.
    """


class OdekWarning(UserWarning):
    """A warning odek reported for a launched sandbox's plan or launch (SPEC
    §4.3, §6.3), emitted by :meth:`Client.launch`, :func:`odek.launch` and
    their asyncio forms through :func:`warnings.warn` — the same warnings as
    ``sandbox.info.warnings`` (and, for the plan's, :attr:`Plan.warnings`).

    Filter them as any warning, e.g.
    ``warnings.simplefilter("error", odek.OdekWarning)`` to refuse a sandbox
    that can reach the internet, or ``"ignore"`` to silence them.

    Attributes:
        kind (str): machine-readable kind, e.g.
            ``"attached_network_not_internal"`` (:attr:`PlanWarning.kind`).
    """

    def __init__(self, message: str, kind: str = "") -> None:
        super().__init__(message)
        self.kind = kind


def _warn_launch(sandbox: "Sandbox", stacklevel: int) -> None:
    """Emits a launched sandbox's warnings: one :class:`OdekWarning` for each
    of ``sandbox.info.warnings`` (the fallback one excepted), then
    :class:`HostFallbackWarning` when commands run on the host.
    ``stacklevel`` as :func:`warnings.warn`'s, counted from the caller of
    this function (1: that caller's line; 2: its caller's). A warning turned into an exception by a filter removes the
    sandbox before it propagates (nobody would hold it)."""
    try:
        for w in sandbox.info.warnings:
            if w.kind == "fallback":
                continue
            warnings.warn(OdekWarning(f"odek: {w.message}", w.kind), stacklevel=stacklevel + 1)
        if sandbox.isolation == "fallback":
            warnings.warn(
                "odek: NO SANDBOX — commands will run ON THE HOST without isolation "
                "(the daemon was unreachable or the image could not be pulled); "
                "resolve without allow_host_fallback=True to make this an error",
                HostFallbackWarning,
                stacklevel=stacklevel + 1,
            )
    except BaseException:
        sandbox.close()
        raise


class Sandbox(Managed[Any]):
    """A launched sandbox (``odek_sandbox_t``): a container, or — in loud
    fallback or with the sandbox off — the host (see :attr:`isolation`).

    :meth:`close` (alias :meth:`destroy`) removes the container (force) and
    frees the handle; it is idempotent. A ``with`` block always removes the
    container, even when the block raises. Methods may be called from several
    threads at once. Any use after close raises :class:`InvalidHandleError`.

    Closing also reports the files host tools run that the sandbox changed
    (:class:`CloseResult`, :attr:`close_result`; a
    :class:`HostFilesChangedWarning` when there are any).
    """

    _kind = "sandbox"
    _info: SandboxInfo
    _close_result: Optional[CloseResult] = None

    def __init__(self) -> None:  # pragma: no cover - use Client.launch / odek.launch
        raise TypeError("sandboxes come from odek.launch() or Client.launch()")

    @classmethod
    def _adopt(cls, ptr: Any) -> "Sandbox":
        self = cls.__new__(cls)
        self._set_handle(ptr)
        try:
            self._info = SandboxInfo.from_json(_ffi.call_str("odek_sandbox_info", ptr))
        except BaseException:
            self.close()
            raise
        return self

    def _free(self, ptr: Any) -> None:
        L = _ffi.lib()
        name = getattr(self, "_info", None)
        name = name.name if name else ""
        if not hasattr(L, "odek_sandbox_close"):
            # A libodek from before the close result: removed all the same.
            _ffi.check(L.odek_sandbox_destroy(ptr))
            self._close_result = CloseResult(
                name=name,
                changed_host_files=(),
                host_files_unchecked=(
                    "the loaded libodek predates odek_sandbox_close and cannot compare them"
                ),
            )
            return
        out = _ffi.OwnedStr()
        _ffi.check(L.odek_sandbox_close(ptr, ctypes.byref(out)))
        self._close_result = CloseResult.from_json(_ffi.take_string(out))

    # Managed.close returns None; a sandbox's close has a result (callers
    # that ignore it, as Managed's own __exit__ does, are unaffected).
    def close(self) -> CloseResult:  # type: ignore[override]
        """Removes the container (force), frees the handle, and returns what
        the sandbox changed of the files host tools run (git hooks,
        ``.git/config``, ``.envrc``, ``.vscode/tasks.json``, Makefiles,
        ``package.json``, ``.pre-commit-config.yaml``), compared once the
        container is gone. When any changed, or they could not be compared,
        also emits a :class:`HostFilesChangedWarning` with the report's line.
        Idempotent: a second call returns the first one's result.

        Returns:
            CloseResult: ``changed_host_files`` (empty when none changed).

        Raises:
            ForkedError: called in a process forked from the one that made
                the handle: nothing is removed.
            OdekError: the removal failed (the handle is gone all the same;
                ``odek sandbox gc`` reaps the container).
        """
        p = self._take()
        if p is not None:
            self._free(p)
            r = self._close_result
            if r is not None and r.message:
                warnings.warn(
                    f"odek: sandbox {r.name}: {r.message}", HostFilesChangedWarning, stacklevel=2
                )
        if self._close_result is None:
            info = getattr(self, "_info", None)
            return CloseResult(name=info.name if info else "", changed_host_files=())
        return self._close_result

    @property
    def close_result(self) -> Optional[CloseResult]:
        """What :meth:`close` found, once it ran (``None`` before)."""
        return self._close_result

    def destroy(self) -> CloseResult:
        """Removes the container and frees the handle (same as :meth:`close`)."""
        return self.close()

    def __repr__(self) -> str:
        info = getattr(self, "_info", None)
        name = info.name if info else "?"
        iso = info.isolation if info else "?"
        state = "closed" if self.closed else "live"
        return f"Sandbox(name={name!r}, isolation={iso!r}) [{state}]"

    @property
    def info(self) -> SandboxInfo:
        """Name, container ID, isolation, startup line, warnings, plan and
        applied settings (read at launch; still readable after close)."""
        return self._info

    @property
    def name(self) -> str:
        """The sandbox (container) name."""
        return self._info.name

    @property
    def container_id(self) -> Optional[str]:
        """The container ID; ``None`` when commands run on the host."""
        return self._info.container_id

    @property
    def isolation(self) -> str:
        """``"container"``, ``"fallback"`` (host, unsandboxed) or ``"off"``."""
        return self._info.isolation

    def describe(self, *, cancel: Optional[CancelToken] = None) -> Description:
        """Describes the sandbox for the agent (SPEC §9). Blocks.

        Returns:
            Description: ``.prompt`` goes into the system prompt, ``.tool``
            into the shell tool's description, ``.environment`` is the data.
        """
        L = _ffi.lib()
        h = self._handle()
        env, prompt, tool = _ffi.OwnedStr(), _ffi.OwnedStr(), _ffi.OwnedStr()
        _ffi.check(L.odek_describe_cancellable(
            h, _cancel.arg(cancel), ctypes.byref(env), ctypes.byref(prompt), ctypes.byref(tool)
        ))
        # All three were written (out-params are written only on success).
        e, p, t = _ffi.take_string(env), _ffi.take_string(prompt), _ffi.take_string(tool)
        return Description._from(e, p, t)

    def exec(
        self,
        argv: Optional[Sequence[str]] = None,
        *,
        shell: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        workdir: Optional[str] = None,
        cancel: Optional[CancelToken] = None,
    ) -> ExecResult:
        """Runs a command in the sandbox and waits for it. Blocks.

        Give exactly one of ``argv`` or ``shell``.

        Args:
            argv (list[str] | None): program and arguments, run directly
                (e.g. ``["redis-cli", "-h", "redis", "ping"]``).
            shell (str | None): a command line run by ``/bin/sh -c``.
            env (dict[str, str] | None): extra environment variables.
            timeout (float | None): seconds; when it expires the result has
                ``exit_code`` 124 and ``timed_out`` True, and the command's
                processes are killed with SIGKILL (through odek's supervisor:
                its process group, session and descendants; without it: those
                carrying its ``ODEK_EXEC_ID`` tag, and their children);
                ``killed`` is True only when none was left. ``None``: wait as long as it
                takes.
            workdir (str | None): working directory inside the sandbox
                (default ``/workspace``).
            cancel (CancelToken | None): :meth:`CancelToken.cancel` kills
                the command as a timeout would and raises :class:`CancelledError`.

        Returns:
            ExecResult: exit code, stdout and stderr (at most 16 MiB each). A
            non-zero exit is not an exception.

        Raises:
            UsageError: neither or both of ``argv``/``shell``, or a bad timeout.
            DockerRejectedError: the command could not be started or waited for (402).
            InvalidHandleError: the sandbox was closed.
        """
        req = _exec_request(argv, shell, env, timeout, workdir)
        h = self._handle()
        return ExecResult.from_json(
            _ffi.call_str("odek_exec_cancellable", h, req, _cancel.arg(cancel))
        )

    def read_file(self, path: str, *, binary: bool = False, offset: Optional[int] = None,
                  length: Optional[int] = None,
                  cancel: Optional[CancelToken] = None) -> "FileContent":
        """Reads (part of) a file inside the sandbox, as its command user with
        its mounts (never the host's file system). Blocks.

        Args:
            path (str): absolute, or relative to ``/workspace``.
            binary (bool): return ``bytes`` (sent as base64) instead of text.
            offset (int | None): first byte (default 0).
            length (int | None): most bytes (default and at most
                :data:`odek.FILE_READ_LIMIT`, 4 MiB).
            cancel (CancelToken | None): stops the call (:class:`CancelledError`).

        Returns:
            FileContent: ``content`` and the file's ``size``; ``truncated``
            and ``next_offset`` say whether and where it goes on.

        Raises:
            FileError: absent, a directory, not permitted, not UTF-8 as
                text (use ``binary=True``), or no supervisor in the sandbox (217).
            MissingFunctionError: the loaded libodek predates file tools.
        """
        from ._files import read_file

        return read_file(self._handle(), path, binary=binary, offset=offset, length=length,
                         cancel=cancel)

    def write_file(self, path: str, content: Union[str, bytes], *,
                   cancel: Optional[CancelToken] = None) -> "FileWritten":
        """Creates or replaces a whole file inside the sandbox, as its command
        user with its mounts: parent directories are created, a replaced file
        keeps its permissions (a temporary file and a rename), a symlink is
        followed inside the sandbox. ``str`` is written as UTF-8, ``bytes`` as
        they are (at most :data:`odek.FILE_WRITE_LIMIT`, 16 MiB); the content
        goes over stdin, not an argument list. Blocks.

        Raises:
            FileError: over the limit, a read-only file system (e.g. a
                ``sandbox_readonly`` workspace, named in the message), not
                permitted, a directory, or no supervisor (217); nothing written.
            MissingFunctionError: the loaded libodek predates file tools.
        """
        from ._files import write_file

        return write_file(self._handle(), path, content, cancel=cancel)

    def edit_file(self, path: str, edits: Sequence[Union[Tuple[str, str], Mapping[str, str]]], *,
                  cancel: Optional[CancelToken] = None) -> "FileEdited":
        """Edits a UTF-8 file inside the sandbox by exact replacements and
        writes it back: ``edits`` are ``(old, new)`` pairs (or
        ``{"oldText", "newText"}`` dicts) applied in order; each old text must
        occur exactly once. Not atomic against a process in the sandbox
        writing the same file meanwhile. Blocks.

        Returns:
            FileEdited: ``diff`` is the unified diff.

        Raises:
            FileError: an old text absent or found more than once (nothing
                written; the message names the edit), and as :meth:`write_file`.
        """
        from ._files import edit_file

        return edit_file(self._handle(), path, edits, cancel=cancel)

    def list_directory(self, path: str = ".", *,
                       cancel: Optional[CancelToken] = None) -> "DirectoryListing":
        """Lists a directory inside the sandbox, as its command user (a
        symlink is not followed). Blocks.

        Raises:
            FileError: absent, not a directory, not permitted, or no supervisor (217).
        """
        from ._files import list_directory

        return list_directory(self._handle(), path, cancel=cancel)

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
    ) -> "ExecStream":
        """Runs a command in the sandbox and yields its output as it comes.

        Arguments as :meth:`exec`. The command starts now; the returned
        :class:`ExecStream` is an iterator of :class:`OutputChunk`
        ``(stream, data)`` — ``stream`` ``"stdout"`` or ``"stderr"``,
        ``data`` raw bytes — that ends when the command ends; its
        :attr:`~ExecStream.result` is then the :class:`ExecResult` that
        :meth:`exec` would return (the same exit code, timeout, output
        capped at 16 MiB per stream)::

            with sandbox.exec_stream(shell="pytest -x", timeout=600) as run:
                for chunk in run:
                    print(chunk.stream, chunk.data.decode(errors="replace"), end="")
            print(run.result.exit_code)

        ``stdin``: ``None`` (the default) gives the command no stdin
        (``/dev/null``); ``bytes`` are written to it and then it is closed;
        ``True`` opens it for :meth:`ExecStream.write` and
        :meth:`ExecStream.close_stdin` while the command runs. Stdin is served
        by odek's supervisor (the default in a sandbox); without it the
        stream raises :class:`DockerRejectedError` (402) and nothing runs.

        Chunks not read yet wait in memory. Closing the stream before the
        command ended (:meth:`ExecStream.close`, the end of its ``with``
        block, or dropping it) kills the command as its timeout would; so
        does ``cancel`` (then give the stream a token of its own: closing
        the stream cancels it).

        Raises:
            MissingFunctionError: the loaded libodek predates streaming
                exec (nothing runs).
            UsageError: neither or both of ``argv``/``shell``, or a bad timeout.
            InvalidHandleError: the sandbox was closed.
            OdekError: a failure of the exec itself is raised by the
                iteration (after the chunks before it) and by ``result``,
                as :meth:`exec` would raise it.
        """
        from ._stream import ExecStream

        req = _exec_request(argv, shell, env, timeout, workdir)
        if stdin is False:
            stdin = None
        return ExecStream(self, req, cancel, stdin)


def _exec_request(
    argv: Optional[Sequence[str]],
    shell: Optional[str],
    env: Optional[Mapping[str, str]],
    timeout: Optional[float],
    workdir: Optional[str],
) -> bytes:
    """The ``odek.exec-request/1`` JSON of :meth:`Sandbox.exec` and
    :meth:`Sandbox.exec_stream` (type errors raised here; the library checks
    the rest)."""
    req: Dict[str, Any] = {}
    if argv is not None:
        if isinstance(argv, (str, bytes)):
            raise TypeError("argv must be a list of str; pass a command line as shell=...")
        argv = list(argv)
        if not all(isinstance(a, str) for a in argv):
            raise TypeError("argv must be a list of str")
        req["argv"] = argv
    if shell is not None:
        if not isinstance(shell, str):
            raise TypeError("shell must be a str")
        req["shell"] = shell
    e = _str_map(env, "env")
    if e:
        req["env"] = e
    if timeout is not None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError("timeout must be a number of seconds")
        try:
            secs = float(timeout)
        except OverflowError:  # an int too big for a float
            secs = math.inf
        if not math.isfinite(secs):
            # JSON carries no NaN or infinity, so libodek cannot be asked:
            # the same typed refusal it gives any other bad timeout.
            raise UsageError(
                CODES["INVALID_ARGUMENT"],
                "usage",
                f"timeout must be a positive number of seconds below 1000000000 (got {timeout!r})",
            )
        req["timeout_secs"] = secs
    if workdir is not None:
        req["workdir"] = os.fspath(workdir)
    return _dumps(req, "exec request")


def narrow(
    parent_plan: PlanLike,
    *,
    networks: Optional[Sequence[str]] = None,
    compose_project: Optional[str] = None,
    network_mode: Optional[str] = None,
    pids_limit: Optional[int] = None,
    memory: Optional[str] = None,
    cpus: Optional[str] = None,
    readonly: Optional[bool] = None,
    image: Optional[str] = None,
    runtime: Optional[str] = None,
) -> Plan:
    """Derives a sub-agent's plan from its parent's resolved plan (SPEC §8).

    Never asks Docker. Every argument is optional; unset inherits the parent.
    The child keeps the parent's approval request (SPEC §7): when the parent
    needed approval, so does the child — launch it with the parent's
    :class:`Approval` (same key and networks), with ``approve(child, …)``,
    or a standing approval (a stored trust, ``ODEK_APPROVE_PROJECT_SANDBOX``
    at the parent's resolve); otherwise :meth:`Client.launch` raises
    :class:`ApprovalRequiredError` and creates nothing. The launch re-checks
    the project's networks (SPEC §7.4).

    Args:
        parent_plan (Plan | str): the parent's resolved plan.
        networks (list[str] | None): a subset of the parent's networks, by
            name or full ID.
        compose_project (str | None): only the parent's networks that carried
            this Compose project when the parent resolved.
        network_mode (str | None): ``"none"`` (from ``"bridge"``), never the
            reverse. ``"none"`` without ``networks`` or ``compose_project``
            leaves the child no network at all (the parent's attached
            networks are dropped too); with them, exactly those.
        pids_limit (int | None): processes, at most the parent's.
        memory (str | None): e.g. ``"256m"``, at most the parent's.
        cpus (str | None): e.g. ``"0.5"``, at most the parent's.
        readonly (bool | None): ``True`` only.
        image (str | None): must equal the parent's image reference.
        runtime (str | None): must name the parent's OCI runtime (the one
            it asked for, or the engine's default it was resolved with).

    Raises:
        ConfigError: the request would widen the parent's sandbox (``ODEK_E_NARROW``).
        UsageError: a malformed request.
    """
    req: Dict[str, Any] = {"schema": "odek.narrow-request/1"}
    for key, value in (
        ("networks", None if networks is None else list(networks)),
        ("compose_project", compose_project),
        ("network_mode", network_mode),
        ("pids_limit", pids_limit),
        ("memory", memory),
        ("cpus", cpus),
        ("readonly", readonly),
        ("image", image),
        ("runtime", runtime),
    ):
        if value is not None:
            req[key] = value
    return Plan(_ffi.call_str("odek_narrow", _plan_json(parent_plan), _dumps(req, "narrow request")))


def launch(
    workdir: PathLike,
    settings: Optional[Mapping[str, Any]] = None,
    *,
    approve: Optional[str] = None,
    client: Optional[Client] = None,
    read_user_config: bool = True,
    read_project_config: bool = True,
    env: Optional[Mapping[str, str]] = None,
    allow_host_fallback: bool = False,
) -> Sandbox:
    """Resolves, approves if asked, and launches a sandbox in one call.

    ::

        with odek.launch(workdir=".", settings={"sandbox_compose_project": "myapp"}) as sandbox:
            print(sandbox.exec(["redis-cli", "-h", "redis", "ping"]).stdout)

    Args:
        workdir (str | PathLike): the project directory (``/workspace``).
        settings (dict | None): operator settings (SPEC §3.1 config keys).
        approve (str | None): when the project config needs approval:
            ``"once"`` or ``"trust"`` grants it; ``None`` grants nothing — a
            stored trust or ``ODEK_APPROVE_PROJECT_SANDBOX=1`` still counts,
            otherwise launch raises :class:`ApprovalRequiredError`.
        client (Client | None): the client to use; default: a temporary
            client for the default Docker endpoint, closed before returning.
        read_user_config, read_project_config, env, allow_host_fallback:
            as :meth:`Client.resolve` (by default a sandbox is required: no
            silent host shell).

    Returns:
        Sandbox: a live sandbox; use ``with`` so the container is always removed.

    Warns:
        OdekWarning, HostFallbackWarning: as :meth:`Client.launch`.

    Raises:
        OdekError: any failure of resolve, approve or launch (see :meth:`Client.launch`).
    """
    sandbox = _resolve_and_launch(
        workdir, settings, approve=approve, client=client,
        read_user_config=read_user_config, read_project_config=read_project_config,
        env=env, allow_host_fallback=allow_host_fallback,
    )
    _warn_launch(sandbox, stacklevel=2)
    return sandbox


def _resolve_and_launch(
    workdir: PathLike,
    settings: Optional[Mapping[str, Any]] = None,
    *,
    approve: Optional[str] = None,
    client: Optional[Client] = None,
    read_user_config: bool = True,
    read_project_config: bool = True,
    env: Optional[Mapping[str, str]] = None,
    allow_host_fallback: bool = False,
) -> Sandbox:
    """:func:`launch` without emitting its warnings."""
    if approve not in (None, "once", "trust"):
        raise ValueError(f'approve must be None, "once" or "trust" (got {approve!r})')
    own = client is None
    c = Client() if own else client
    assert c is not None
    try:
        plan = c.resolve(
            workdir,
            settings,
            read_user_config=read_user_config,
            read_project_config=read_project_config,
            env=env,
            allow_host_fallback=allow_host_fallback,
        )
        approval: Optional[Approval] = None
        request = plan.approval_request
        if request is not None:
            # A stored trust or ODEK_APPROVE_PROJECT_SANDBOX=1 is a standing
            # approval: odek_launch accepts it without an approval object.
            if approve is not None and not request.standing:
                approval = c.approve(plan, approve)
        return c._launch(plan, approval)
    finally:
        if own:
            c.close()
