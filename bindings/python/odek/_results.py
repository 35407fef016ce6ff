"""Typed objects for a launched sandbox: info, description, exec result.

Like :mod:`odek._types`, each keeps the JSON it came from and offers typed
accessors; ``repr()`` never shows env values, prompts or command output.
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ._types import Plan, PlanWarning, _parse, _warnings

__all__ = [
    "Peer",
    "EnvironmentNetwork",
    "Description",
    "ExecResult",
    "SandboxInfo",
    "HostFileChange",
    "CloseResult",
]


@dataclass(frozen=True)
class Peer:
    """Another container on an attached network.

    Attributes:
        names (tuple[str, ...]): host names it answers to there, Compose
            service first (e.g. ``("redis", "myapp_redis_1")``).
    """

    names: Tuple[str, ...]


@dataclass(frozen=True)
class EnvironmentNetwork:
    """An attached network as the agent sees it.

    Attributes:
        name (str | None): the name, when it passed SPEC §9.3.
        internal (bool): no route out of the host.
        peers (tuple[Peer, ...]): other containers with at least one listed name.
    """

    name: Optional[str]
    internal: bool
    peers: Tuple[Peer, ...]


@dataclass(frozen=True)
class Description:
    """What the agent is told about its sandbox (SPEC §9), from ``describe``.

    Attributes:
        environment (dict): the structured ``"odek.environment/1"`` document.
        prompt (str): the "Execution environment" block to append to the
            agent's system prompt.
        tool (str): the short variant for the shell tool's description.
        environment_json (str): ``environment`` as returned by the library.
    """

    environment: Dict[str, Any] = field(repr=False)
    prompt: str = field(repr=False)
    tool: str = field(repr=False)
    environment_json: str = field(repr=False)

    @classmethod
    def _from(cls, env_json: str, prompt: str, tool: str) -> "Description":
        return cls(
            environment=_parse(env_json, "odek.environment", "environment"),
            prompt=prompt,
            tool=tool,
            environment_json=env_json,
        )

    def __repr__(self) -> str:
        return (
            f"Description(isolation={self.isolation!r}, network={self.network!r}, "
            f"internet={self.internet}, names={list(self.service_names)!r})"
        )

    @property
    def isolation(self) -> str:
        """``"container"``, ``"fallback"`` or ``"off"``."""
        return str(self.environment.get("isolation", ""))

    @property
    def network(self) -> Optional[str]:
        """The network the container actually has (SPEC §4.2 names), or
        ``None`` on the host."""
        return self.environment.get("network")

    @property
    def internet(self) -> bool:
        """Whether the internet is reachable."""
        return bool(self.environment.get("internet", False))

    @property
    def workspace(self) -> str:
        """Where the project directory is (``/workspace`` in a container)."""
        return str((self.environment.get("workspace") or {}).get("path", ""))

    @property
    def workspace_readonly(self) -> bool:
        """The project directory is mounted read-only."""
        return bool((self.environment.get("workspace") or {}).get("readonly", False))

    @property
    def networks(self) -> Tuple[EnvironmentNetwork, ...]:
        """Attached networks with the names other containers answer to."""
        out = []
        for n in self.environment.get("networks") or []:
            peers = tuple(Peer(tuple(p.get("names") or ())) for p in (n.get("peers") or []))
            out.append(EnvironmentNetwork(n.get("name"), bool(n.get("internal", False)), peers))
        return tuple(out)

    @property
    def service_names(self) -> Tuple[str, ...]:
        """Every host name a peer answers to, de-duplicated, in order."""
        seen: Dict[str, None] = {}
        for n in self.networks:
            for p in n.peers:
                for name in p.names:
                    seen.setdefault(name, None)
        return tuple(seen)


@dataclass(frozen=True)
class ExecResult:
    """The outcome of :meth:`odek.Sandbox.exec` (``"odek.exec-result/1"``).

    A non-zero exit is a result, not an exception.

    Attributes:
        exit_code (int): the command's exit status (124 on timeout).
        stdout (str): standard output as UTF-8 (invalid bytes replaced), at
            most 16 MiB (``odek.EXEC_OUTPUT_LIMIT`` bytes).
        stderr (str): standard error, likewise.
        timed_out (bool): the timeout expired.
        killed (bool): after a timeout, odek killed the command and saw none
            of its (tagged) processes left; False when the kill failed or
            could not be confirmed (``stderr`` then says why).
        stdout_truncated (bool): stdout was cut at the limit.
        stderr_truncated (bool): stderr was cut at the limit.
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    killed: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @classmethod
    def from_json(cls, text: str) -> "ExecResult":
        """Parses an ``"odek.exec-result/1"`` document."""
        d = _parse(text, "odek.exec-result", "exec result")
        return cls(
            exit_code=int(d.get("exit_code", -1)),
            stdout=str(d.get("stdout", "")),
            stderr=str(d.get("stderr", "")),
            timed_out=bool(d.get("timed_out", False)),
            killed=bool(d.get("killed", False)),
            stdout_truncated=bool(d.get("stdout_truncated", False)),
            stderr_truncated=bool(d.get("stderr_truncated", False)),
        )

    @property
    def ok(self) -> bool:
        """Exit status 0 and no timeout."""
        return self.exit_code == 0 and not self.timed_out

    @property
    def truncated(self) -> bool:
        """Either stream was cut at the limit."""
        return self.stdout_truncated or self.stderr_truncated


@dataclass(frozen=True)
class SandboxInfo:
    """A launched sandbox (``"odek.sandbox-info/1"``).

    Attributes:
        name (str): the sandbox (container) name.
        container_id (str | None): the container ID; ``None`` on the host.
        isolation (str): ``"container"``, ``"fallback"`` or ``"off"``.
        startup_line (str): the SPEC §6.4 line (what was applied).
        warnings (tuple[PlanWarning, ...]): warnings of the launch.
        plan (Plan): the plan it was launched from.
        applied (dict | None): settings read back from the container.
        json (str): the document as returned by the library.
    """

    name: str
    container_id: Optional[str]
    isolation: str
    startup_line: str
    warnings: Tuple[PlanWarning, ...] = field(repr=False)
    plan: Plan = field(repr=False)
    applied: Optional[Dict[str, Any]] = field(repr=False)
    json: str = field(repr=False)

    @classmethod
    def from_json(cls, text: str) -> "SandboxInfo":
        """Parses an ``"odek.sandbox-info/1"`` document."""
        d = _parse(text, "odek.sandbox-info", "sandbox info")
        iso = d.get("isolation") or {}
        return cls(
            name=str(d.get("name", "")),
            container_id=d.get("container_id"),
            isolation=str(iso.get("kind", "")) if isinstance(iso, dict) else str(iso),
            startup_line=str(d.get("startup_line", "")),
            warnings=_warnings(d.get("warnings")),
            plan=Plan(_json.dumps(d.get("plan"))),
            applied=d.get("applied"),
            json=text,
        )


@dataclass(frozen=True)
class HostFileChange:
    """A file host tools run (a git hook, ``.git/config``, ``.envrc``,
    ``.vscode/tasks.json``, a Makefile, ``package.json``,
    ``.pre-commit-config.yaml``) that changed while the sandbox lived.

    Attributes:
        path (str): relative to the working directory, e.g.
            ``".git/hooks/pre-commit"``. The sandbox chose the name: escape
            control characters before printing it to a terminal.
        change (str): what changed, e.g. ``"created, executable"``,
            ``"content changed"``, ``"mode 0644 → 0755, now executable"``.
        kinds (tuple[str, ...]): the same as data: ``"created"``,
            ``"deleted"``, ``"content"``, ``"mode"``, ``"symlink_target"``,
            ``"kind"``, ``"unreadable"``, ``"too_many_entries"``.
    """

    path: str
    change: str
    kinds: Tuple[str, ...]


@dataclass(frozen=True)
class CopiedBack:
    """What a copied workspace's copy-back wrote into the working directory
    and left out (docs/SANDBOXING.md "A copied workspace").

    Attributes:
        written (tuple[str, ...]): files and symlinks written, relative to
            the working directory, in archive order.
        skipped (tuple[tuple[str, str], ...]): each entry left out, as
            ``(path, reason)``.
    """

    written: Tuple[str, ...] = ()
    skipped: Tuple[Tuple[str, str], ...] = ()


@dataclass(frozen=True)
class CloseResult:
    """What closing a sandbox found (``"odek.close-result/1"``): the files
    host tools run that it changed, compared once its container was
    removed against what its launch recorded. Review them before running
    git or make in the working directory.

    Attributes:
        name (str): the sandbox name.
        changed_host_files (tuple[HostFileChange, ...]): empty when none
            changed, on the host and for a read-only workspace.
        host_files_unchecked (str | None): why they could not be compared,
            when they could not.
        message (str | None): the report as one line to show (names
            escaped), or ``None`` when there is nothing to say.
        copied_back (CopiedBack | None): for a copied workspace, what its
            copy-back before removal wrote and left out; ``None`` for a
            bind-mounted or read-only one.
        json (str): the document as returned by the library.
    """

    name: str
    changed_host_files: Tuple[HostFileChange, ...]
    host_files_unchecked: Optional[str] = None
    message: Optional[str] = None
    copied_back: Optional[CopiedBack] = None
    json: str = field(default="", repr=False)

    @classmethod
    def from_json(cls, text: str) -> "CloseResult":
        """Parses an ``"odek.close-result/1"`` document."""
        d = _parse(text, "odek.close-result", "close result")
        changes = tuple(
            HostFileChange(
                path=str(c.get("path", "")),
                change=str(c.get("change", "")),
                kinds=tuple(str(k) for k in (c.get("kinds") or ())),
            )
            for c in (d.get("changed_host_files") or ())
        )
        unchecked = d.get("host_files_unchecked")
        message = d.get("message")
        cb = d.get("copied_back")
        copied = None
        if cb is not None:
            copied = CopiedBack(
                written=tuple(str(w) for w in (cb.get("written") or ())),
                skipped=tuple(
                    (str(k.get("path", "")), str(k.get("reason", "")))
                    for k in (cb.get("skipped") or ())
                ),
            )
        return cls(
            name=str(d.get("name", "")),
            changed_host_files=changes,
            host_files_unchecked=None if unchecked is None else str(unchecked),
            message=None if message is None else str(message),
            copied_back=copied,
            json=text,
        )
