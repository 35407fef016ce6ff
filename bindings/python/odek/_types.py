"""Typed objects over odek's JSON documents: the plan side (plan, approval).
The config view is in :mod:`odek._view`, what a launched sandbox returns in
:mod:`odek._results`.

Each object keeps the JSON it was made from (``.json``, to hand back to the C
library unchanged) and the parsed document (``.data``), and offers typed
accessors for the members an agent framework needs. Documents carry a
``"schema"`` member (``"odek.plan/1"`` …); members this binding does not know
are kept in ``.data`` untouched.

Plans and sandbox info contain container environment *values*, which are user
data (possibly secrets): ``repr()`` never shows them.
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple, TypedDict, cast

from . import _ffi

__all__ = [
    "PlanWarning",
    "Network",
    "EnvKey",
    "Plan",
    "ApprovalRequest",
    "Approval",
]


# --- wire documents -------------------------------------------------------------
#
# The JSON documents of the C ABI as this binding writes and reads them, one
# TypedDict each. Their members are checked against the JSON Schemas derived
# from libodek's own types (ffi/schema/*.json, ``cargo xtask schema``) by
# tests/test_schema_types.py: same member names, and a member is required
# here exactly when the schema requires it. Results carry every member
# (``null`` where allowed); requests mark what may be left out.


class ClientOptionsDoc(TypedDict, total=False):
    """``odek.client-options/1`` (``odek_client_new``)."""

    schema: str
    docker_host: str
    docker_cert_path: str  # ca.pem, cert.pem, key.pem for a tcp:// docker_host
    engine: str  # "docker" | "fake"
    sandbox_pool: int  # 0..8: the client's warm pool


class _ResolveRequestRequired(TypedDict):
    workdir: str


class ResolveRequestDoc(_ResolveRequestRequired, total=False):
    """``odek.resolve-request/1`` (``odek_resolve``). ``allow_host_fallback``
    is sent only when the caller sets it: libodek decides the default (a
    sandbox is required)."""

    schema: str
    settings: Dict[str, Any]
    read_user_config: bool
    read_project_config: bool
    env: Dict[str, str]
    allow_host_fallback: bool


class ExecRequestDoc(TypedDict, total=False):
    """``odek.exec-request/1`` (``odek_exec``): exactly one of argv/shell."""

    schema: str
    argv: List[str]
    shell: str
    env: Dict[str, str]
    timeout_secs: float
    workdir: str


class NarrowRequestDoc(TypedDict, total=False):
    """``odek.narrow-request/1`` (``odek_narrow``)."""

    schema: str
    networks: List[str]
    compose_project: str
    network_mode: str
    pids_limit: int
    memory: str
    cpus: str
    readonly: bool
    image: str
    runtime: str  # must be the parent's OCI runtime


class WarningDoc(TypedDict):
    """A warning in a plan, sandbox info or config view."""

    kind: str
    message: str


class AccountDoc(TypedDict):
    """The account odek gives a non-root numeric sandbox user (SPEC §6.1
    "user"): login name, uid, gid and its ``HOME`` (an empty tmpfs)."""

    name: str
    uid: int
    gid: int
    home: str


class PlanDoc(TypedDict):
    """``odek.plan/1``. Members this binding passes through unread are
    typed ``Any``."""

    schema: str
    mode: str
    isolation: Dict[str, Any]  # {"kind": …, "class"?, "reason"?}
    workdir: str
    workdir_id: Optional[Dict[str, Any]]
    odek_home: str
    endpoint: Optional[str]
    endpoint_owner: Optional[Dict[str, Any]]  # {"uid": 1000, "name": "alice"|None}
    engine: Optional[Dict[str, Any]]
    image: Dict[str, Any]  # {"reference": {"original", "digest", …}, "source": {"kind"}}
    network_mode: str
    networks: List[Dict[str, Any]]
    bridge_network_id: Optional[str]
    network_summary: str
    internet: bool
    dns_forwarding: Optional[str]  # "closed_by_odek" | "engine_refuses" | "may_forward" (SPEC §4.6)
    pids_limit: int
    readonly: bool
    workspace: str  # "bind" | "copy" (SPEC §6.1 "workspace")
    egress: Optional[Dict[str, Any]]  # SPEC §4.5: allowlist, network; None: not egress mode
    memory_bytes: Optional[int]
    cpus: Optional[Dict[str, Any]]  # {"text": "0.5", …}
    user: Optional[str]
    user_choice: Optional[str]  # "operator" | "operator_ids" | "rootless_root" | "image"
    account: Optional[AccountDoc]
    runtime: Optional[str]  # the OCI runtime asked for; None: the engine's default
    engine_default_runtime: Optional[str]
    env: List[Any]
    volumes: List[Any]
    masks: List[str]
    require_sandbox: bool
    sources: Dict[str, Dict[str, Any]]
    warnings: List[WarningDoc]
    approval: Optional[Dict[str, Any]]
    log_retention_days: int  # days its record is kept after it ended


class EnvKeyDoc(TypedDict):
    """One ``sandbox_env`` key on an approval request."""

    key: str
    interpolates_host: bool
    reads: List[str]


class NetworkCardDoc(TypedDict):
    """One resolved network on an approval request."""

    name: str
    id: str
    internal: bool
    compose_project: str  # "-" when none
    stack: Optional[str]  # a Docker Swarm stack's network (SPEC §4.1)
    scope: Optional[str]  # "swarm" for a stack's overlay; None: local
    attachable: bool  # Attachable (bound by the key with scope, SPEC §7.3)


class ApprovalRequestDoc(TypedDict):
    """``odek.approval-request/1``."""

    schema: str
    key: str
    project_dir: str
    config: str
    knobs: List[str]
    image: Optional[str]
    network: Optional[str]
    env: List[EnvKeyDoc]
    volumes: List[str]
    requested_networks: List[str]
    requested_compose_project: Optional[str]
    requested_stack: Optional[str]  # sandbox_stack from the project (SPEC §4.1)
    runtime: Optional[str]  # sandbox_runtime from the project
    egress: Optional[List[str]]  # sandbox_egress from the project, when it widens (SPEC §4.5)
    egress_network: Optional[str]  # sandbox_egress_network from the project
    networks: List[NetworkCardDoc]
    network_summary: str
    internet: bool
    trusted: bool
    previously_trusted: bool
    engine: str  # what the key binds: "engine:<ID>" or "endpoint:<endpoint>" (SPEC §7.3)
    trusted_before_engine_binding: bool  # trusted under the key of earlier releases: asked once more
    env_binding: Optional[str]
    dockerfile_sha256: Optional[str]
    approved_by_env: bool
    standing: Optional[str]
    host_fallback: bool
    card: str


class ApprovalDoc(TypedDict):
    """``odek.approval/1`` (from ``odek_approve``, passed to ``odek_launch``)."""

    schema: str
    key: str
    network_ids: List[str]
    via: str


class SupervisorDoc(TypedDict):
    """Whether commands run through odek's supervisor; when not, why and
    which guarantees then do not hold (docs/SANDBOXING.md, "The supervisor")."""

    on: bool
    reason: Optional[str]
    not_held: List[str]


class SandboxInfoDoc(TypedDict):
    """``odek.sandbox-info/1``."""

    schema: str
    name: str
    container_id: Optional[str]
    isolation: Dict[str, Any]
    startup_line: str
    warnings: List[WarningDoc]
    plan: PlanDoc
    applied: Optional[Dict[str, Any]]
    supervisor: Optional[SupervisorDoc]


class WorkspaceDoc(TypedDict):
    """The ``/workspace`` mount in an environment."""

    path: str
    readonly: bool
    copied: bool  # a copy of the working directory (sandbox_workspace "copy")


class PeerDoc(TypedDict):
    """Another container on an attached network."""

    names: List[str]


class EnvNetworkDoc(TypedDict):
    """An attached network in an environment."""

    name: Optional[str]
    internal: bool
    peers: List[PeerDoc]
    stack: Optional[str]  # a Swarm stack's network: its peers are the stack's services on this node


class EnvironmentDoc(TypedDict):
    """``odek.environment/1`` (``odek_describe``)."""

    schema: str
    isolation: str
    fallback_reason: Optional[str]
    sandbox: str
    workspace: WorkspaceDoc
    network: Optional[str]
    internet: bool
    dns_forwarding: Optional[str]  # "closed_by_odek" | "engine_refuses" | "may_forward" (SPEC §4.6)
    networks: List[EnvNetworkDoc]
    omitted_networks: int
    omitted_names: int
    pids_limit: Optional[int]
    memory_bytes: Optional[int]
    cpus: Optional[str]
    user: Optional[str]
    account: Optional[AccountDoc]
    supervisor: Optional[SupervisorDoc]
    runtime: Optional[str]  # the OCI runtime the container runs with
    egress: Optional[Dict[str, Any]]  # SPEC §4.5: the proxy, its hosts, what it refused
    tools: Optional[List[str]]


class ExecResultDoc(TypedDict):
    """``odek.exec-result/1``."""

    schema: str
    exit_code: int
    timed_out: bool
    killed: bool
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool


class HostFileChangeDoc(TypedDict):
    """One changed file host tools run, in ``odek.close-result/1``."""

    path: str
    change: str
    kinds: List[str]


class SkippedDoc(TypedDict):
    """One entry a copy-back left out, in ``odek.close-result/1``."""

    path: str
    reason: str


class CopiedBackDoc(TypedDict):
    """A copied workspace's copy-back, in ``odek.close-result/1``."""

    written: List[str]
    skipped: List[SkippedDoc]


class CloseResultDoc(TypedDict):
    """``odek.close-result/1`` (``odek_sandbox_close``)."""

    schema: str
    name: str
    changed_host_files: List[HostFileChangeDoc]
    host_files_unchecked: Optional[str]
    message: Optional[str]
    copied_back: Optional[CopiedBackDoc]


class _ImageViewRequired(TypedDict):
    reference: str
    digest: Optional[str]
    id: Optional[str]
    repo_digests: List[str]
    origin: str


class ImageViewDoc(_ImageViewRequired, total=False):
    """The image in a config view (``when_missing`` only when it is missing)."""

    when_missing: str


class NetworkViewDoc(TypedDict):
    """A network in a config view."""

    name: Optional[str]
    id: str
    internal: bool
    compose_project: Optional[str]
    stack: Optional[str]  # Docker Swarm stack label (SPEC §4.1)


class ConfigViewDoc(TypedDict):
    """``odek.config-view/1``."""

    schema: str
    mode: str
    isolation: str
    fallback_reason: Optional[str]
    fallback_allowed: bool
    endpoint: Optional[str]
    endpoint_owner: Optional[str]
    api_version: Optional[str]
    image: ImageViewDoc
    network_mode: str
    network: str
    internet: bool
    dns_forwarding: Optional[str]  # "closed_by_odek" | "engine_refuses" | "may_forward" (SPEC §4.6)
    networks: List[NetworkViewDoc]
    pids_limit: int
    init: bool
    tmpfs: str
    memory_bytes: Optional[int]
    cpus: Optional[str]
    user: Optional[str]
    user_choice: Optional[str]
    account: Optional[AccountDoc]
    runtime: Optional[str]  # sandbox_runtime; None: the engine's default
    default_runtime: Optional[str]
    egress: Optional[Dict[str, Any]]  # SPEC §4.5: allowlist, network, subnets, proxy SHA-256
    readonly: bool
    workspace: str  # "bind" | "copy" (SPEC §6.1 "workspace")
    workdir: str
    env_keys: List[str]
    volumes: List[str]
    masks: List[str]
    sources: Dict[str, Dict[str, Any]]
    warnings: List[WarningDoc]
    pending_approval: List[str]
    supervisor: Optional[SupervisorDoc]


class _ReadFileRequestRequired(TypedDict):
    path: str


class ReadFileRequestDoc(_ReadFileRequestRequired, total=False):
    """``odek.read-file-request/1`` (``odek_read_file``)."""

    schema: str
    encoding: str
    offset: int
    length: int


class ReadFileResultDoc(TypedDict):
    """``odek.read-file-result/1``."""

    schema: str
    path: str
    encoding: str
    content: str
    size: int
    offset: int
    length: int
    truncated: bool
    next_offset: Optional[int]
    limit: int


class _WriteFileRequestRequired(TypedDict):
    path: str
    content: str


class WriteFileRequestDoc(_WriteFileRequestRequired, total=False):
    """``odek.write-file-request/1`` (``odek_write_file``)."""

    schema: str
    encoding: str


class WriteFileResultDoc(TypedDict):
    """``odek.write-file-result/1``."""

    schema: str
    path: str
    bytes_written: int
    created: bool


FileEditDoc = TypedDict("FileEditDoc", {"oldText": str, "newText": str})
FileEditDoc.__doc__ = "One edit of ``odek.edit-file-request/1``."


class _EditFileRequestRequired(TypedDict):
    path: str
    edits: List[FileEditDoc]


class EditFileRequestDoc(_EditFileRequestRequired, total=False):
    """``odek.edit-file-request/1`` (``odek_edit_file``)."""

    schema: str


class EditFileResultDoc(TypedDict):
    """``odek.edit-file-result/1``."""

    schema: str
    path: str
    diff: str
    diff_truncated: bool
    edits: int


class _ListDirectoryRequestRequired(TypedDict):
    path: str


class ListDirectoryRequestDoc(_ListDirectoryRequestRequired, total=False):
    """``odek.list-directory-request/1`` (``odek_list_directory``)."""

    schema: str


DirEntryDoc = TypedDict(
    "DirEntryDoc", {"name": str, "type": str, "size": Optional[int], "target": Optional[str]}
)
DirEntryDoc.__doc__ = "One entry of ``odek.list-directory-result/1``."


class ListDirectoryResultDoc(TypedDict):
    """``odek.list-directory-result/1``."""

    schema: str
    path: str
    entries: List[DirEntryDoc]
    listing: str
    total: int
    truncated: bool


#: Each wire document and where its schema is: (file in ffi/schema, name in
#: its ``$defs`` or ``None`` for the document itself).
WIRE_DOCUMENTS: Dict[type, Tuple[str, Optional[str]]] = {
    ClientOptionsDoc: ("client-options.json", None),
    ResolveRequestDoc: ("resolve-request.json", None),
    ExecRequestDoc: ("exec-request.json", None),
    NarrowRequestDoc: ("narrow-request.json", None),
    PlanDoc: ("plan.json", None),
    WarningDoc: ("plan.json", "Warning"),
    ApprovalRequestDoc: ("approval-request.json", None),
    EnvKeyDoc: ("approval-request.json", "EnvKeyView"),
    NetworkCardDoc: ("approval-request.json", "NetworkCard"),
    ApprovalDoc: ("approval.json", None),
    SandboxInfoDoc: ("sandbox-info.json", None),
    EnvironmentDoc: ("environment.json", None),
    SupervisorDoc: ("environment.json", "SupervisorState"),
    WorkspaceDoc: ("environment.json", "Workspace"),
    EnvNetworkDoc: ("environment.json", "EnvNetwork"),
    PeerDoc: ("environment.json", "Peer"),
    ExecResultDoc: ("exec-result.json", None),
    CloseResultDoc: ("close-result.json", None),
    HostFileChangeDoc: ("close-result.json", "HostFileChange"),
    CopiedBackDoc: ("close-result.json", "Unpacked"),
    SkippedDoc: ("close-result.json", "Skipped"),
    ConfigViewDoc: ("config-view.json", None),
    ImageViewDoc: ("config-view.json", "ImageView"),
    NetworkViewDoc: ("config-view.json", "NetworkView"),
    ReadFileRequestDoc: ("read-file-request.json", None),
    ReadFileResultDoc: ("read-file-result.json", None),
    WriteFileRequestDoc: ("write-file-request.json", None),
    WriteFileResultDoc: ("write-file-result.json", None),
    EditFileRequestDoc: ("edit-file-request.json", None),
    FileEditDoc: ("edit-file-request.json", "FileEdit"),
    EditFileResultDoc: ("edit-file-result.json", None),
    ListDirectoryRequestDoc: ("list-directory-request.json", None),
    ListDirectoryResultDoc: ("list-directory-result.json", None),
    DirEntryDoc: ("list-directory-result.json", "DirEntry"),
}


def _parse(text: str, schema: str, what: str) -> Dict[str, Any]:
    if not isinstance(text, str):
        raise TypeError(f"{what} JSON must be a str, not {type(text).__name__}")
    data = _json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{what} JSON must be an object")
    got = data.get("schema")
    if not (isinstance(got, str) and got.startswith(schema + "/")):
        raise ValueError(f"{what} JSON has schema {got!r}, expected {schema}/…")
    return data


@dataclass(frozen=True)
class PlanWarning:
    """A warning odek reports (SPEC §4.3, §6.3).

    Attributes:
        kind (str): machine-readable kind, e.g. ``"attached_network_not_internal"``.
        message (str): one line for a human.
    """

    kind: str
    message: str

    @classmethod
    def _from(cls, d: Mapping[str, Any]) -> "PlanWarning":
        return cls(kind=str(d.get("kind", "")), message=str(d.get("message", "")))

    def __str__(self) -> str:
        return self.message


def _warnings(items: Any) -> Tuple[PlanWarning, ...]:
    return tuple(PlanWarning._from(w) for w in (items or []))


@dataclass(frozen=True)
class Network:
    """A Docker network the sandbox is (or would be) attached to.

    Attributes:
        name (str | None): the network name (``None`` when it fails the
            sanitising rules of SPEC §9.3 and is not shown).
        id (str): the full 64-hex network ID.
        internal (bool): Docker's ``Internal`` flag (no route out of the host).
        compose_project (str | None): the ``com.docker.compose.project`` label.
    """

    name: Optional[str]
    id: str
    internal: bool
    compose_project: Optional[str] = None

    @classmethod
    def _from(cls, d: Mapping[str, Any]) -> "Network":
        cp = d.get("compose_project")
        return cls(
            name=d.get("name"),
            id=str(d.get("id", "")),
            internal=bool(d.get("internal", False)),
            compose_project=None if cp in (None, "-") else str(cp),
        )


@dataclass(frozen=True)
class EnvKey:
    """A project-requested container env key on an approval request.

    Attributes:
        key (str): the variable name (its value is never shown).
        interpolates_host (bool): the value reads host variables via ``${…}``.
        reads (tuple[str, ...]): the names of the host variables it reads.
    """

    key: str
    interpolates_host: bool
    reads: Tuple[str, ...] = ()


@dataclass(frozen=True)
class ApprovalRequest:
    """What the operator is asked to approve (SPEC §7.2), from
    ``odek_plan_approval_request`` (``"odek.approval-request/1"``).

    Names are terminal-safe (sanitised by odek).

    Attributes:
        json (str): the document as returned by the library.
        key (str): the approval key (SPEC §7.3, 64 hex).
        project_dir (str): absolute project directory.
        config (str): the project config file asking (``…/odek.json``).
        knobs (tuple[str, ...]): config keys that need approval.
        image (str | None): ``sandbox_image`` from the project.
        network (str | None): ``sandbox_network`` from the project.
        env (tuple[EnvKey, ...]): ``sandbox_env`` keys from the project.
        volumes (tuple[str, ...]): ``sandbox_volumes`` from the project.
        requested_networks (tuple[str, ...]): ``sandbox_networks`` as written.
        requested_compose_project (str | None): ``sandbox_compose_project``.
        networks (tuple[Network, ...]): the project-requested networks resolved
            (name, full ID, internal flag, Compose project).
        network_summary (str): ``none``, ``bridge``, ``attached`` or
            ``bridge_attached`` (SPEC §4.2).
        internet (bool): whether the sandbox would reach the internet.
        trusted (bool): a stored trust already covers this key.
        approved_by_env (bool): ``ODEK_APPROVE_PROJECT_SANDBOX=1`` is set.
        previously_trusted (bool): the store trusts this project directory
            with other settings or networks (review what changed).
        engine (str): what the key binds the engine by (SPEC §7.3):
            ``"engine:<ID>"`` (its ``/info`` ID) or ``"endpoint:<endpoint>"``
            for an engine that reports none; a trust holds on it only.
        trusted_before_engine_binding (bool): the store trusts these settings
            under the key of earlier releases, which bound no engine: asked
            once more.
        card_text (str): the card the ``odek`` CLI prompts with (see :meth:`card`).
        standing_via (str | None): libodek's decision: ``"stored"`` or
            ``"env"`` when the plan is approved without a question (see
            :attr:`standing`), ``None`` when the operator must be asked.
    """

    json: str = field(repr=False)
    key: str
    project_dir: str
    config: str
    knobs: Tuple[str, ...]
    image: Optional[str]
    network: Optional[str]
    env: Tuple[EnvKey, ...]
    volumes: Tuple[str, ...]
    requested_networks: Tuple[str, ...]
    requested_compose_project: Optional[str]
    networks: Tuple[Network, ...]
    network_summary: str
    internet: bool
    trusted: bool
    approved_by_env: bool
    previously_trusted: bool = False
    engine: str = ""
    trusted_before_engine_binding: bool = False
    card_text: str = field(default="", repr=False)
    standing_via: Optional[str] = None

    @classmethod
    def from_json(cls, text: str) -> "ApprovalRequest":
        """Parses an ``"odek.approval-request/1"`` document."""
        d = cast(ApprovalRequestDoc, _parse(text, "odek.approval-request", "approval request"))
        return cls(
            json=text,
            key=str(d.get("key", "")),
            project_dir=str(d.get("project_dir", "")),
            config=str(d.get("config", "")),
            knobs=tuple(d.get("knobs") or ()),
            image=d.get("image"),
            network=d.get("network"),
            env=tuple(
                EnvKey(
                    str(e.get("key", "")),
                    bool(e.get("interpolates_host", False)),
                    tuple(str(v) for v in (e.get("reads") or ())),
                )
                for e in (d.get("env") or [])
            ),
            volumes=tuple(d.get("volumes") or ()),
            requested_networks=tuple(d.get("requested_networks") or ()),
            requested_compose_project=d.get("requested_compose_project"),
            networks=tuple(Network._from(n) for n in (d.get("networks") or [])),
            network_summary=str(d.get("network_summary", "")),
            internet=bool(d.get("internet", False)),
            trusted=bool(d.get("trusted", False)),
            approved_by_env=bool(d.get("approved_by_env", False)),
            previously_trusted=bool(d.get("previously_trusted", False)),
            engine=str(d.get("engine") or ""),
            trusted_before_engine_binding=bool(d.get("trusted_before_engine_binding", False)),
            card_text=str(d.get("card") or ""),
            standing_via=d.get("standing"),
        )

    @property
    def standing(self) -> bool:
        """True when no question is needed: a stored trust or
        ``ODEK_APPROVE_PROJECT_SANDBOX=1`` already approves the plan, as
        libodek decided it (:attr:`standing_via`)."""
        return self.standing_via is not None

    def card(self) -> str:
        """A plain-text card listing everything asked for (for a prompt): the
        same text the ``odek`` CLI prompts with, names terminal-safe."""
        if self.card_text:
            return self.card_text
        lines = [f"The project's {self.config} asks for sandbox settings that need approval:"]
        if self.image is not None:
            lines.append(f"  image     {self.image}")
        if self.network is not None:
            lines.append(f"  network   {self.network}")
        if self.env:
            keys = [
                e.key
                + (
                    " (reads host " + ", ".join("$" + v for v in e.reads) + ")"
                    if e.interpolates_host and e.reads
                    else (" (reads host variables via ${...})" if e.interpolates_host else "")
                )
                for e in self.env
            ]
            lines.append("  env       " + ", ".join(keys))
        for v in self.volumes:
            lines.append(f"  volume    {v}")
        if self.requested_compose_project is not None:
            lines.append(f"  compose   {self.requested_compose_project}")
        if self.networks:
            lines.append(
                f"  networks  {len(self.networks)} ({self.network_summary}; internet "
                f"{'reachable' if self.internet else 'not reachable'})"
            )
            for n in self.networks:
                lines.append(f"    {n.name or '(name omitted)'}")
                lines.append(
                    f"      id {n.id}  internal={'yes' if n.internal else 'no'}  "
                    f"compose={n.compose_project or '-'}"
                )
        lines.append(f"  key       {self.key}")
        return "\n".join(lines)


@dataclass(frozen=True)
class Approval:
    """A granted approval (``"odek.approval/1"``), passed to launch.

    Attributes:
        json (str): the document as returned by ``odek_approve``.
        key (str): the approved key.
        network_ids (tuple[str, ...]): full IDs of the networks approved
            (re-checked at launch, SPEC §7.4).
        via (str): ``"once"``, ``"trust"``, ``"stored"`` or ``"env"``.
    """

    json: str = field(repr=False)
    key: str
    network_ids: Tuple[str, ...]
    via: str

    @classmethod
    def from_json(cls, text: str) -> "Approval":
        """Parses an ``"odek.approval/1"`` document."""
        d = cast(ApprovalDoc, _parse(text, "odek.approval", "approval"))
        return cls(
            json=text,
            key=str(d.get("key", "")),
            network_ids=tuple(d.get("network_ids") or ()),
            via=str(d.get("via", "")),
        )


@dataclass(frozen=True, eq=False)
class Plan:
    """A resolved plan (``"odek.plan/1"``): everything a launch will do.

    Make one with :meth:`odek.Client.resolve` or :func:`odek.narrow`. The raw
    JSON (``.json``) is what crosses back into the library; the accessors
    read it. Two plans are equal when their documents are.

    Attributes:
        json (str): the plan as returned by the library (contains env values:
            user data, never logged by ``repr``).
    """

    json: str = field(repr=False)
    _data: Dict[str, Any] = field(init=False, repr=False, compare=False)
    _approval: List[Optional["ApprovalRequest"]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_data", _parse(self.json, "odek.plan", "plan"))
        object.__setattr__(self, "_approval", [])

    @classmethod
    def from_json(cls, text: str) -> "Plan":
        """A plan from its JSON (e.g. one stored earlier)."""
        return cls(text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plan) and other._data == self._data

    def __hash__(self) -> int:
        return hash(_json.dumps(self._data, sort_keys=True))

    def __repr__(self) -> str:
        nets = ",".join(n.name or "?" for n in self.networks) or "-"
        return (
            f"Plan(mode={self.mode!r}, isolation={self.isolation!r}, image={self.image!r}, "
            f"network={self.network_summary!r}, networks={nets!r}, "
            f"needs_approval={self.needs_approval})"
        )

    @property
    def data(self) -> Dict[str, Any]:
        """The parsed document (read it; changing it does not change ``json``)."""
        return self._data

    @property
    def mode(self) -> str:
        """Sandbox mode (SPEC §3.3): ``"explicit"``, ``"implicit"`` or ``"off"``."""
        return str(self._data.get("mode", ""))

    @property
    def isolation(self) -> str:
        """``"container"``, ``"fallback"`` (loud fallback: commands run on the
        host without isolation) or ``"off"``."""
        iso = self._data.get("isolation") or {}
        return str(iso.get("kind", "")) if isinstance(iso, dict) else str(iso)

    @property
    def fallback_reason(self) -> Optional[str]:
        """Why there is no container (fallback only), else ``None``."""
        iso = self._data.get("isolation") or {}
        return iso.get("reason") if isinstance(iso, dict) else None

    @property
    def workdir(self) -> str:
        """Absolute working directory (mounted at ``/workspace``)."""
        return str(self._data.get("workdir", ""))

    @property
    def image(self) -> str:
        """The image reference as configured (e.g. ``"odek-test/base:1"``)."""
        img = self._data.get("image") or {}
        ref = img.get("reference") or {}
        return str(ref.get("original", ""))

    @property
    def network_mode(self) -> str:
        """``sandbox_network``: ``"none"`` or ``"bridge"``."""
        return str(self._data.get("network_mode", ""))

    @property
    def network_summary(self) -> str:
        """How the container is networked (SPEC §4.2): ``"none"``,
        ``"bridge"``, ``"attached"`` or ``"bridge_attached"``."""
        return str(self._data.get("network_summary", ""))

    @property
    def internet(self) -> bool:
        """Whether the sandbox can reach the internet (SPEC §4.2)."""
        return bool(self._data.get("internet", False))

    @property
    def networks(self) -> Tuple[Network, ...]:
        """Attached networks, by full ID, in attach order."""
        return tuple(Network._from(n) for n in (self._data.get("networks") or []))

    @property
    def pids_limit(self) -> int:
        """``--pids-limit`` (processes)."""
        return int(self._data.get("pids_limit", 0))

    @property
    def readonly(self) -> bool:
        """``/workspace`` is mounted read-only."""
        return bool(self._data.get("readonly", False))

    @property
    def memory_bytes(self) -> Optional[int]:
        """Memory limit in bytes, or ``None``."""
        v = self._data.get("memory_bytes")
        return None if v is None else int(v)

    @property
    def cpus(self) -> Optional[str]:
        """CPU limit as written (e.g. ``"0.5"``), or ``None``."""
        v = self._data.get("cpus")
        return v.get("text") if isinstance(v, dict) else v

    @property
    def user(self) -> Optional[str]:
        """The user commands run as: ``uid:gid`` or a name, the operator's
        ``sandbox_user`` or else the calling process's own uid:gid on a local
        engine (SPEC §6.1 "user"); ``None`` for the image's own user."""
        return self._data.get("user")

    @property
    def user_choice(self) -> Optional[str]:
        """Why :attr:`user`: ``"operator"``, ``"operator_ids"``,
        ``"rootless_root"`` or ``"image"``."""
        return self._data.get("user_choice")

    @property
    def account(self) -> Optional[AccountDoc]:
        """The account odek gives a non-root numeric user (name, uid, gid,
        the empty tmpfs ``home``), or ``None``."""
        return self._data.get("account")

    @property
    def warnings(self) -> Tuple[PlanWarning, ...]:
        """Warnings found while resolving."""
        return _warnings(self._data.get("warnings"))

    @property
    def approval_request(self) -> Optional[ApprovalRequest]:
        """What the operator must approve before launch, or ``None``.

        Read through ``odek_plan_approval_request`` (does not block).
        """
        if not self._approval:
            text = _ffi.call_str("odek_plan_approval_request", _ffi.cstr(self.json, "plan"))
            value = None if _json.loads(text) is None else ApprovalRequest.from_json(text)
            self._approval.append(value)
        return self._approval[0]

    @property
    def needs_approval(self) -> bool:
        """True when launch needs an :class:`Approval` (a stored trust or
        ``ODEK_APPROVE_PROJECT_SANDBOX=1`` still has to be turned into one)."""
        return self._data.get("approval") is not None
