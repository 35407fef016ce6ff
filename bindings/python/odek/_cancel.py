"""Cancelling a call in flight: :class:`CancelToken` (``odek_cancel_t``).

Pass ``cancel=token`` to :meth:`odek.Client.resolve`, :meth:`~odek.Client.launch`,
:meth:`~odek.Client.config_view`, :meth:`odek.Sandbox.describe` or
:meth:`~odek.Sandbox.exec`, and call :meth:`CancelToken.cancel` from another
thread: the call raises :class:`odek.CancelledError` promptly — a launch
after removing the container it created, an exec after killing its command
as its timeout would. The asyncio API does this by itself when the awaiting
task is cancelled. A token stays cancelled; one token may serve several calls.
"""

from __future__ import annotations

import threading
from typing import Any, Optional

from . import _ffi
from ._errors import CODES, CancelledError, ForkedError


class CancelToken:
    """A cancel handle (``odek_cancel_t``), like a one-way ``threading.Event``.

    Use it as a context manager or call :meth:`close`; a call in flight
    keeps working with it after :meth:`close`.
    """

    def __init__(self) -> None:
        """Raises:
            ForkedError: in a process forked from one that used odek (the
                library makes no handle there).
        """
        self._lock = threading.Lock()
        self._cancelled = False
        self._ptr: Optional[Any] = None
        L = _ffi.lib()
        ptr = L.odek_cancel_new()
        if not ptr:
            # NULL only in a forked child, where every call that takes a
            # handle fails with ODEK_E_FORKED before it reads its
            # arguments: raise the library's own error.
            _ffi.check(L.odek_cancel(_ffi.CancelPtr()))
            raise ForkedError(CODES["FORKED"], "usage", "odek_cancel_new returned NULL")
        self._ptr = ptr

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self._cancelled})"

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Stops every call given this token, now and later. Does not block;
        safe from any thread; idempotent."""
        with self._lock:
            self._cancelled = True
            if self._ptr is not None:
                _ffi.check(_ffi.lib().odek_cancel(self._ptr))

    def close(self) -> None:
        """Frees the handle (without cancelling); idempotent."""
        with self._lock:
            p, self._ptr = self._ptr, None
        if p is not None:
            _ffi.check(_ffi.lib().odek_cancel_free(p))

    def _arg(self) -> Any:
        """The handle for a ``_cancellable`` call. A closed token that was
        cancelled still cancels: the call fails before it starts."""
        with self._lock:
            if self._ptr is None:
                if self._cancelled:
                    raise CancelledError(
                        CODES["CANCELLED"], "cancelled", "the call was cancelled by the caller"
                    )
                raise ValueError("the CancelToken was closed")
            return self._ptr

    def __enter__(self) -> "CancelToken":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass


def arg(token: Optional[CancelToken]) -> Any:
    """The ``odek_cancel_t*`` argument for ``token`` (NULL for None)."""
    if token is None:
        return _ffi.CancelPtr()
    if not isinstance(token, CancelToken):
        raise TypeError("cancel must be an odek.CancelToken or None")
    return token._arg()


__all__ = ["CancelToken"]
