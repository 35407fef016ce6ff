"""The config view (SPEC §10.4) as a typed object."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple

from ._types import Network, PlanWarning, _parse, _warnings

__all__ = ["ConfigView"]


@dataclass(frozen=True)
class ConfigView:
    """The settings a plan actually applies, with sources (SPEC §10.4),
    from ``odek_config_view`` (``"odek.config-view/1"``).

    Attributes:
        json (str): the document as returned by the library.
        data (dict): the parsed document.
    """

    json: str = field(repr=False)
    data: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, text: str) -> "ConfigView":
        """Parses an ``"odek.config-view/1"`` document."""
        return cls(json=text, data=_parse(text, "odek.config-view", "config view"))

    def __repr__(self) -> str:
        return (
            f"ConfigView(mode={self.mode!r}, isolation={self.isolation!r}, image={self.image!r}, "
            f"network={self.network!r}, pids_limit={self.pids_limit})"
        )

    @property
    def mode(self) -> str:
        """``"explicit"``, ``"implicit"`` or ``"off"``."""
        return str(self.data.get("mode", ""))

    @property
    def fallback_allowed(self) -> bool:
        """Whether a setup failure would fall back to the host; ``False``
        means every failure is a refusal (explicit mode,
        ``ODEK_REQUIRE_SANDBOX``, or networks attached)."""
        return bool(self.data.get("fallback_allowed", False))

    @property
    def isolation(self) -> str:
        """``"container"``, ``"fallback"`` or ``"off"``."""
        return str(self.data.get("isolation", ""))

    @property
    def image(self) -> str:
        """The image reference as configured."""
        return str((self.data.get("image") or {}).get("reference", ""))

    @property
    def image_id(self) -> Optional[str]:
        """Local image ID (``sha256:…``) when the daemon has it, else ``None``."""
        return (self.data.get("image") or {}).get("id")

    @property
    def image_digest(self) -> Optional[str]:
        """The pinned digest, if the reference carries one."""
        return (self.data.get("image") or {}).get("digest")

    @property
    def network_mode(self) -> str:
        """``sandbox_network``: ``"none"`` or ``"bridge"``."""
        return str(self.data.get("network_mode", ""))

    @property
    def network(self) -> str:
        """SPEC §4.2 summary: ``none``, ``bridge``, ``attached``, ``bridge_attached``."""
        return str(self.data.get("network", ""))

    @property
    def internet(self) -> bool:
        """Whether the internet is reachable."""
        return bool(self.data.get("internet", False))

    @property
    def networks(self) -> Tuple[Network, ...]:
        """Attached networks."""
        return tuple(Network._from(n) for n in (self.data.get("networks") or []))

    @property
    def pids_limit(self) -> int:
        """``--pids-limit`` (processes)."""
        return int(self.data.get("pids_limit", 0))

    @property
    def init(self) -> bool:
        """``--init`` (always on)."""
        return bool(self.data.get("init", False))

    @property
    def tmpfs(self) -> str:
        """``/tmp`` tmpfs options, e.g. ``"rw,noexec,nosuid"``."""
        return str(self.data.get("tmpfs", ""))

    @property
    def memory_bytes(self) -> Optional[int]:
        """Memory limit in bytes, or ``None``."""
        v = self.data.get("memory_bytes")
        return None if v is None else int(v)

    @property
    def cpus(self) -> Optional[str]:
        """CPU limit as written, or ``None``."""
        return self.data.get("cpus")

    @property
    def user(self) -> Optional[str]:
        """The user commands run as (``uid:gid`` or a name), or ``None`` for
        the image's own (SPEC §6.1 "user")."""
        return self.data.get("user")

    @property
    def user_choice(self) -> Optional[str]:
        """Why :attr:`user`: ``"operator"``, ``"operator_ids"``,
        ``"rootless_root"`` or ``"image"``."""
        return self.data.get("user_choice")

    @property
    def account(self) -> Optional[Dict[str, Any]]:
        """The account odek gives a non-root numeric user (``name``,
        ``uid``, ``gid``, ``home``), or ``None``."""
        return self.data.get("account")

    @property
    def readonly(self) -> bool:
        """``/workspace`` read-only."""
        return bool(self.data.get("readonly", False))

    @property
    def env_keys(self) -> Tuple[str, ...]:
        """Container env keys (values are never shown)."""
        return tuple(self.data.get("env_keys") or ())

    @property
    def sources(self) -> Dict[str, str]:
        """Config key -> where its value came from (``default``, ``user``,
        ``project``, ``env``, ``flag``, ``api`` …)."""
        return {
            k: str(v.get("kind", "")) if isinstance(v, dict) else str(v)
            for k, v in (self.data.get("sources") or {}).items()
        }

    @property
    def warnings(self) -> Tuple[PlanWarning, ...]:
        """Warnings."""
        return _warnings(self.data.get("warnings"))
