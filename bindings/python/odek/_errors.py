"""Exceptions mapped from odek's stable error codes (SPEC §6.3, §10.1).

Every failure from the C library becomes an :class:`OdekError` subclass chosen
by the code's area (the hundreds digit):

=====  ==========================  ===========================================
codes  failure class               exception
=====  ==========================  ===========================================
1xx    ``usage`` (ABI misuse)      :class:`UsageError` (103: :class:`InvalidHandleError`,
                                   107: :class:`ForkedError`)
2xx    ``config``                  :class:`ConfigError`
3xx    ``config`` (approval)       :class:`ApprovalError` (300: :class:`ApprovalRequiredError`)
4xx    ``docker-rejected``         :class:`DockerRejectedError`
5xx    ``image-unavailable``       :class:`ImageUnavailableError`
6xx    ``daemon-unreachable``      :class:`DaemonUnreachableError`
7xx    ``cancelled``               :class:`CancelledError`
=====  ==========================  ===========================================

:data:`CODES` is the code table of ``ffi/include/odek.h`` (the ``ODEK_E_*``
values of ``enum odek_code_t``); a test checks it against the header.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple, Type

#: ``ODEK_E_*`` name (without the prefix) -> code, exactly as in the header.
CODES: Dict[str, int] = {
    "NULL_POINTER": 100,
    "INVALID_UTF8": 101,
    "INVALID_JSON": 102,
    "INVALID_HANDLE": 103,
    "INVALID_ARGUMENT": 104,
    "PANIC": 105,
    "INTERNAL": 106,
    "FORKED": 107,
    "REENTRANT": 108,
    "CONFIG": 200,
    "CONFIG_MALFORMED": 201,
    "NETWORK_MODE": 202,
    "NETWORK_NAME": 203,
    "NETWORK_NOT_FOUND": 204,
    "NETWORK_ID_PREFIX": 205,
    "NETWORK_AMBIGUOUS": 206,
    "NETWORK_UNSUPPORTED": 207,
    "NETWORK_TOO_MANY": 208,
    "COMPOSE_NOT_RUNNING": 209,
    "COMPOSE_NAME": 210,
    "IMAGE_REFERENCE": 211,
    "IMAGE_BUILD": 212,
    "IMAGE_DIGEST": 213,
    "VOLUME": 214,
    "ENDPOINT": 215,
    "NARROW": 216,
    "FILE": 217,
    "APPROVAL_REQUIRED": 300,
    "APPROVAL_MISMATCH": 301,
    "APPROVAL_NETWORKS_CHANGED": 302,
    "APPROVAL_STORE": 303,
    "APPROVAL_DENIED": 304,
    "DOCKER_REJECTED": 400,
    "DOCKER_VERIFY": 401,
    "EXEC": 402,
    "SANDBOX_STOPPED": 403,
    "IMAGE_UNAVAILABLE": 500,
    "DAEMON_UNREACHABLE": 600,
    "DAEMON_TIMEOUT": 601,
    "CANCELLED": 700,
}

#: code -> ``ODEK_E_*`` name (without the prefix).
CODE_NAMES: Dict[int, str] = {v: k for k, v in CODES.items()}

# Module-level constants, e.g. ``odek.E_INVALID_HANDLE == 103``.
for _name, _code in CODES.items():
    globals()["E_" + _name] = _code
del _name, _code


class OdekError(Exception):
    """A failure reported by odek.

    Attributes:
        code (int): the stable numeric code (``ODEK_E_*``, e.g. 202).
        failure_class (str): ``"usage"``, ``"config"``, ``"docker-rejected"``,
            ``"image-unavailable"`` or ``"daemon-unreachable"`` (SPEC §6.3), or
            ``"cancelled"``.
        message (str): one paragraph naming the cause and the fix.
        name (str): the code's symbolic name, e.g. ``"NETWORK_MODE"``
            (``"UNKNOWN"`` for a code this binding does not know).
    """

    def __init__(self, code: int, failure_class: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.failure_class = failure_class
        self.message = message
        self.name = CODE_NAMES.get(code, "UNKNOWN")

    def __str__(self) -> str:
        return f"[odek {self.code} {self.name}, {self.failure_class}] {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(code={self.code}, "
            f"failure_class={self.failure_class!r}, message={self.message!r})"
        )

    def __reduce__(self) -> Tuple[Any, ...]:  # picklable across processes
        return (type(self), (self.code, self.failure_class, self.message))


class UsageError(OdekError):
    """The ABI was misused (1xx): NULL, invalid UTF-8/JSON, wrong shape, a panic."""


class InvalidHandleError(UsageError):
    """A handle is unknown or was already destroyed / closed (103)."""


class ForkedError(UsageError):
    """libodek was called in a process forked (without exec) from the one
    that made its state (107, class ``usage``) — e.g. a ``multiprocessing``
    worker started with the ``fork`` method, the default on Linux before
    Python 3.14, after the parent made a :class:`odek.Client`.

    The child has none of the library's threads, and its connections and
    handles are the parent's, so every call that would use them — a
    client's or sandbox's methods, ``close()``, a new :class:`odek.Client`,
    :func:`odek.launch`, a new :class:`odek.CancelToken` — raises this at
    once: nothing is done, the parent's sandboxes are neither used nor
    removed, and the parent keeps working. The child closed its copies of
    the parent's owner links when it was forked, so it does not keep the
    parent's sandboxes alive either. Start such children with
    ``multiprocessing.set_start_method("spawn")`` (or ``"forkserver"``), or
    use odek only in the child.
    """


class ConfigError(OdekError):
    """Configuration is invalid or cannot be honoured (2xx, class ``config``).

    Fatal in every sandbox mode: nothing runs and no container is left.
    """


class FileError(ConfigError):
    """A file operation in the sandbox was refused (217, class ``config``):
    the path absent or of the wrong type, not permitted to the sandbox's
    command user, a read-only file system (a ``sandbox_readonly``
    workspace), over a size limit, not UTF-8 text, an edit whose old text
    is absent or not unique, or no odek supervisor in the sandbox. Nothing
    was written; the message says why and what to do.
    """


class ApprovalError(ConfigError):
    """Project settings were not (or no longer) approved (3xx, class ``config``)."""


class ApprovalRequiredError(ApprovalError):
    """The plan needs an approval that was not given (300).

    Approve with :meth:`odek.Client.approve` (``"once"`` or ``"trust"``), or
    launch with ``approve=...``.
    """


class DockerRejectedError(OdekError):
    """Docker refused while it answered (4xx): create/start/connect/verify/exec."""


class ImageUnavailableError(OdekError):
    """The image cannot be pulled (5xx)."""


class DaemonUnreachableError(OdekError):
    """The Docker daemon is unreachable or did not answer in time (6xx)."""


class CancelledError(OdekError):
    """The call was cancelled by its caller (700, class ``cancelled``): a
    :class:`odek.CancelToken` was set, or the asyncio task awaiting it was
    cancelled. What the call had made is removed; a command it ran is killed.
    """


_BY_CODE: Dict[int, Type[OdekError]] = {
    CODES["INVALID_HANDLE"]: InvalidHandleError,
    CODES["FORKED"]: ForkedError,
    CODES["APPROVAL_REQUIRED"]: ApprovalRequiredError,
    CODES["FILE"]: FileError,
}

_BY_AREA: Dict[int, Type[OdekError]] = {
    1: UsageError,
    2: ConfigError,
    3: ApprovalError,
    4: DockerRejectedError,
    5: ImageUnavailableError,
    6: DaemonUnreachableError,
    7: CancelledError,
}


def exception_type(code: int) -> Type[OdekError]:
    """The exception class for a code (by exact code, else by area)."""
    return _BY_CODE.get(code) or _BY_AREA.get(code // 100, OdekError)


def error_from(code: int, failure_class: str, message: str) -> OdekError:
    """The exception instance for an error read from the library."""
    return exception_type(code)(code, failure_class, message)


def invalid_handle(what: str) -> InvalidHandleError:
    """The error for using a handle this binding already closed."""
    return InvalidHandleError(
        CODES["INVALID_HANDLE"],
        "usage",
        f"the {what} was already closed (destroyed); create a new one",
    )
