"""A base class for objects that own a C handle (SPEC §10.2).

A managed object frees its handle exactly once: on :meth:`Managed.close`, at
the end of a ``with`` block (even when the block raises), or — as a backstop —
when it is garbage-collected (with a :class:`ResourceWarning`, like an
unclosed file). ``close()`` is idempotent and safe to call from several
threads at once.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any, Generic, Optional, TypeVar

from ._errors import invalid_handle

P = TypeVar("P")


class Managed(Generic[P]):
    """Owns one C handle of type ``P`` (a ctypes pointer)."""

    #: Human name used in messages ("client", "sandbox").
    _kind = "handle"

    _ptr: Optional[P] = None
    _close_lock: Optional[threading.Lock] = None

    def _set_handle(self, ptr: P) -> None:
        self._close_lock = threading.Lock()
        self._ptr = ptr

    def _handle(self) -> P:
        """The live handle.

        Raises:
            InvalidHandleError: the object was closed.
        """
        p = self._ptr
        if p is None:
            raise invalid_handle(self._kind)
        return p

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (or the handle was never set)."""
        return self._ptr is None

    def _take(self) -> Optional[P]:
        lock = self._close_lock
        if lock is None:
            return None
        with lock:
            p, self._ptr = self._ptr, None
        return p

    def _free(self, ptr: P) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def close(self) -> None:
        """Frees the handle. Idempotent: a second call does nothing.

        Raises:
            ForkedError: called in a process forked from the one that made
                the handle: nothing is freed or removed (the handle is the
                parent's); this object counts as closed in the child.
            OdekError: the library reported a failure while freeing (the handle
                is gone all the same).
        """
        p = self._take()
        if p is not None:
            self._free(p)

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc is None:
            self.close()
            return
        # An exception is on its way out: free the handle, and do not let a
        # failure to free replace it — attach it instead.
        try:
            self.close()
        except Exception as close_error:  # noqa: BLE001
            note = f"while closing the {self._kind}: {close_error}"
            if hasattr(exc, "add_note"):
                exc.add_note(note)
            else:  # Python < 3.11
                warnings.warn(note, RuntimeWarning, stacklevel=2)

    def __del__(self) -> None:
        try:
            if self._ptr is None:
                return
            warnings.warn(
                f"unclosed odek {self._kind} {self!r}; use close() or a with block",
                ResourceWarning,
                stacklevel=2,
            )
            self.close()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass
