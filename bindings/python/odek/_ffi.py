"""The C ABI of ``libodek.so`` as ctypes declarations — the one place they live.

Every exported function of ``ffi/include/odek.h`` is declared in
:data:`FUNCTIONS` with its return type and argument types; a test
(``tests/test_header.py``) parses the header and checks names, arity and every
type against this table, and checks :data:`ABI_VERSION` against
``ODEK_ABI_VERSION``.

Type conventions (mirroring the header's ownership rules):

* ``const char *`` (borrowed input, or a static / error-owned result) is
  :class:`ctypes.c_char_p`;
* ``char *`` (a string odek allocates and the caller frees with
  ``odek_string_free``) is ``POINTER(c_char)`` so the raw pointer survives
  until it is freed — ``c_char_p`` would copy and drop it;
* handles and error objects are pointers to opaque structures.

The library is found (in this order) through the ``ODEK_LIB`` environment
variable (an override), the ``libodek.so`` bundled inside this package (an
installed wheel always has one), or — only when this package is the source
tree of an odek checkout, for development — that checkout's
``target/release`` or ``target/debug`` directory. It is loaded on first use,
and its ``odek_abi_version()`` must equal :data:`ABI_VERSION`.

ctypes releases the GIL around every call into a ``CDLL``, so blocking calls
(resolve, launch, exec, …) let other Python threads run.
"""

from __future__ import annotations

import ctypes
import os
import threading
from ctypes import CFUNCTYPE, POINTER, c_char, c_char_p, c_int32, c_size_t, c_uint8, c_uint32, c_void_p
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

#: The ABI version this binding is written against (``ODEK_ABI_VERSION``).
ABI_VERSION = 1

#: Most bytes of stdout or stderr one exec result carries
#: (``ODEK_EXEC_OUTPUT_LIMIT``, 16 MiB each).
EXEC_OUTPUT_LIMIT = 16 << 20

#: ``stream`` of an output callback: the command's standard output
#: (``ODEK_STREAM_STDOUT``).
STREAM_STDOUT = 1

#: ``stream`` of an output callback: the command's standard error
#: (``ODEK_STREAM_STDERR``).
STREAM_STDERR = 2

#: The library's file name.
LIB_NAME = "libodek.so"


class odek_client_t(ctypes.Structure):
    """Opaque client handle (``odek_client_t``); never dereferenced."""


class odek_sandbox_t(ctypes.Structure):
    """Opaque sandbox handle (``odek_sandbox_t``); never dereferenced."""


class odek_error_t(ctypes.Structure):
    """Opaque error object (``odek_error_t``); never dereferenced."""


class odek_cancel_t(ctypes.Structure):
    """Opaque cancel handle (``odek_cancel_t``); never dereferenced."""


#: ``char *`` — a string owned by the caller, freed with ``odek_string_free``.
OwnedStr = POINTER(c_char)
#: ``odek_error_t *``
ErrorPtr = POINTER(odek_error_t)
#: ``odek_client_t *``
ClientPtr = POINTER(odek_client_t)
#: ``odek_sandbox_t *``
SandboxPtr = POINTER(odek_sandbox_t)
#: ``odek_cancel_t *``
CancelPtr = POINTER(odek_cancel_t)


class odek_stdin_t(ctypes.Structure):
    """Opaque stdin handle (``odek_stdin_t``); never dereferenced."""


#: ``odek_stdin_t *``
StdinPtr = POINTER(odek_stdin_t)

#: ``odek_output_fn``: ``void (*)(void *user_data, int32_t stream,
#: const uint8_t *bytes, size_t len)``, called by ``odek_exec_stream`` on the
#: calling thread (ctypes takes the GIL for it).
OutputFn = CFUNCTYPE(None, c_void_p, c_int32, POINTER(c_uint8), c_size_t)

#: name -> (restype, argtypes), in header order. ``None`` restype is ``void``.
FUNCTIONS: Dict[str, Tuple[Any, List[Any]]] = {
    "odek_abi_version": (c_uint32, []),
    "odek_version": (c_char_p, []),
    "odek_string_free": (None, [OwnedStr]),
    "odek_client_new": (ErrorPtr, [c_char_p, POINTER(ClientPtr)]),
    "odek_client_free": (ErrorPtr, [ClientPtr]),
    "odek_resolve": (ErrorPtr, [ClientPtr, c_char_p, POINTER(OwnedStr)]),
    "odek_resolve_cancellable": (ErrorPtr, [ClientPtr, c_char_p, CancelPtr, POINTER(OwnedStr)]),
    "odek_plan_approval_request": (ErrorPtr, [c_char_p, POINTER(OwnedStr)]),
    "odek_approve": (ErrorPtr, [ClientPtr, c_char_p, c_char_p, POINTER(OwnedStr)]),
    "odek_launch": (ErrorPtr, [ClientPtr, c_char_p, c_char_p, POINTER(SandboxPtr)]),
    "odek_launch_cancellable": (
        ErrorPtr,
        [ClientPtr, c_char_p, c_char_p, CancelPtr, POINTER(SandboxPtr)],
    ),
    "odek_sandbox_info": (ErrorPtr, [SandboxPtr, POINTER(OwnedStr)]),
    "odek_describe": (
        ErrorPtr,
        [SandboxPtr, POINTER(OwnedStr), POINTER(OwnedStr), POINTER(OwnedStr)],
    ),
    "odek_describe_cancellable": (
        ErrorPtr,
        [SandboxPtr, CancelPtr, POINTER(OwnedStr), POINTER(OwnedStr), POINTER(OwnedStr)],
    ),
    "odek_exec": (ErrorPtr, [SandboxPtr, c_char_p, POINTER(OwnedStr)]),
    "odek_exec_cancellable": (ErrorPtr, [SandboxPtr, c_char_p, CancelPtr, POINTER(OwnedStr)]),
    "odek_narrow": (ErrorPtr, [c_char_p, c_char_p, POINTER(OwnedStr)]),
    "odek_config_view": (ErrorPtr, [ClientPtr, c_char_p, POINTER(OwnedStr)]),
    "odek_config_view_cancellable": (
        ErrorPtr,
        [ClientPtr, c_char_p, CancelPtr, POINTER(OwnedStr)],
    ),
    "odek_sandbox_destroy": (ErrorPtr, [SandboxPtr]),
    "odek_sandbox_close": (ErrorPtr, [SandboxPtr, POINTER(OwnedStr)]),
    "odek_cancel_new": (CancelPtr, []),
    "odek_cancel": (ErrorPtr, [CancelPtr]),
    "odek_cancel_free": (ErrorPtr, [CancelPtr]),
    "odek_debug_panic": (ErrorPtr, []),
    "odek_exec_stream": (
        ErrorPtr,
        [SandboxPtr, c_char_p, CancelPtr, OutputFn, c_void_p, POINTER(OwnedStr)],
    ),
    "odek_stdin_new": (StdinPtr, []),
    # bytes: ``const uint8_t *`` (c_char_p passes a bytes object's buffer;
    # the length is given, so NUL bytes are data).
    "odek_stdin_write": (ErrorPtr, [StdinPtr, c_char_p, c_size_t]),
    "odek_stdin_close": (ErrorPtr, [StdinPtr]),
    "odek_stdin_free": (ErrorPtr, [StdinPtr]),
    "odek_exec_stream_stdin": (
        ErrorPtr,
        [SandboxPtr, c_char_p, CancelPtr, StdinPtr, OutputFn, c_void_p, POINTER(OwnedStr)],
    ),
    "odek_read_file": (ErrorPtr, [SandboxPtr, c_char_p, CancelPtr, POINTER(OwnedStr)]),
    "odek_write_file": (ErrorPtr, [SandboxPtr, c_char_p, CancelPtr, POINTER(OwnedStr)]),
    "odek_edit_file": (ErrorPtr, [SandboxPtr, c_char_p, CancelPtr, POINTER(OwnedStr)]),
    "odek_list_directory": (ErrorPtr, [SandboxPtr, c_char_p, CancelPtr, POINTER(OwnedStr)]),
    "odek_error_code": (c_int32, [ErrorPtr]),
    "odek_error_class": (c_char_p, [ErrorPtr]),
    "odek_error_message": (c_char_p, [ErrorPtr]),
    "odek_error_free": (None, [ErrorPtr]),
}


class LibraryError(ImportError):
    """``libodek.so`` cannot be found or loaded."""


class AbiVersionError(LibraryError):
    """The loaded ``libodek.so`` implements another ABI version than this binding."""

    def __init__(self, message: str, *, path: str, found: int, expected: int) -> None:
        super().__init__(message)
        self.path = path
        self.found = found
        self.expected = expected


def _package_dir() -> Path:
    return Path(__file__).resolve().parent


def _checkout_root() -> Optional[Path]:
    """The odek checkout this package's source lies in, or ``None`` (installed)."""
    root = _package_dir().parent.parent.parent
    if (root / "ffi" / "Cargo.toml").is_file() and (root / "bindings" / "python" / "odek").is_dir():
        return root
    return None


def candidate_paths() -> List[Path]:
    """The places searched for the library, in order (``ODEK_LIB`` aside).

    The ``libodek.so`` inside the package; then, only when the package is
    the source tree of an odek checkout (``<checkout>/bindings/python/odek``),
    the checkout's ``target/release`` and ``target/debug``, honouring
    ``CARGO_TARGET_DIR``.
    """
    paths = [_package_dir() / LIB_NAME]
    root = _checkout_root()
    if root is None:
        return paths
    targets = []
    if os.environ.get("CARGO_TARGET_DIR"):
        targets.append(root / os.environ["CARGO_TARGET_DIR"])
    targets.append(root / "target")
    for t in targets:
        for profile in ("release", "debug"):
            paths.append(t / profile / LIB_NAME)
    return paths


def find_library() -> Path:
    """The path of ``libodek.so`` to load.

    Raises:
        LibraryError: ``ODEK_LIB`` names a missing file, or no candidate exists.
    """
    env = os.environ.get("ODEK_LIB")
    if env:
        p = Path(env)
        if not p.is_file():
            raise LibraryError(
                f"ODEK_LIB={env!r} does not name a file: point ODEK_LIB at a libodek.so, "
                "or unset it to use the library bundled in the package directory "
                f"{str(_package_dir())!r}"
            )
        return p
    tried = candidate_paths()
    for p in tried:
        if p.is_file():
            return p
    if _checkout_root() is None:
        raise LibraryError(
            "cannot find libodek.so: this odek package has none in its package directory "
            f"{str(_package_dir())!r} (an installed wheel always bundles it); reinstall "
            "odek from a wheel (`pip install ./bindings/python` in an odek checkout builds "
            "one), or set ODEK_LIB to the path of a libodek.so"
        )
    raise LibraryError(
        "cannot find libodek.so: build it in this checkout (`cargo build -p odek-ffi`), "
        "set ODEK_LIB to its path, or copy it into the package directory "
        f"{str(_package_dir())!r}. Tried: " + ", ".join(str(p) for p in tried)
    )


#: Exports only test builds of libodek have (cargo feature ``testing``;
#: ``ODEK_TESTING`` in the header): a release library lacks them.
TESTING_ONLY = frozenset({"odek_debug_panic"})


#: Exports added within ABI version 1 after its first release, with what
#: each serves: a library built before them lacks them but is otherwise
#: compatible, so it loads, and using what needs one raises
#: :class:`MissingFunctionError` (:func:`require`).
ADDED_IN_ABI_1 = {
    "odek_exec_stream": "streaming exec (Sandbox.exec_stream)",
    "odek_stdin_new": "stdin for a command (Sandbox.exec_stream(stdin=...))",
    "odek_stdin_write": "stdin for a command (Sandbox.exec_stream(stdin=...))",
    "odek_stdin_close": "stdin for a command (Sandbox.exec_stream(stdin=...))",
    "odek_stdin_free": "stdin for a command (Sandbox.exec_stream(stdin=...))",
    "odek_exec_stream_stdin": "stdin for a command (Sandbox.exec_stream(stdin=...))",
    "odek_read_file": "file tools (Sandbox.read_file)",
    "odek_write_file": "file tools (Sandbox.write_file)",
    "odek_edit_file": "file tools (Sandbox.edit_file)",
    "odek_list_directory": "file tools (Sandbox.list_directory)",
    "odek_sandbox_close": "the close result (Sandbox.close's changed_host_files)",
}


class MissingFunctionError(LibraryError):
    """The loaded ``libodek.so`` is older than this binding and lacks a
    function a method needs (one of :data:`ADDED_IN_ABI_1`)."""

    def __init__(self, message: str, *, path: str, function: str) -> None:
        super().__init__(message)
        self.path = path
        self.function = function


def declare(lib: ctypes.CDLL) -> None:
    """Sets ``restype``/``argtypes`` of every function in :data:`FUNCTIONS`
    (those of :data:`TESTING_ONLY` and :data:`ADDED_IN_ABI_1` only when the
    library exports them)."""
    for name, (restype, argtypes) in FUNCTIONS.items():
        if (name in TESTING_ONLY or name in ADDED_IN_ABI_1) and not hasattr(lib, name):
            continue
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = list(argtypes)


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[Path] = None


def lib() -> ctypes.CDLL:
    """The loaded, declared and version-checked library (loaded once).

    Raises:
        LibraryError: the library is missing or cannot be loaded.
        AbiVersionError: ``odek_abi_version()`` differs from :data:`ABI_VERSION`.
    """
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        path = find_library()
        try:
            handle = ctypes.CDLL(str(path))
        except OSError as e:
            raise LibraryError(f"cannot load {path}: {e}") from e
        try:
            abi = handle.odek_abi_version
        except AttributeError as e:
            raise LibraryError(f"{path} is not libodek.so: it lacks odek_abi_version") from e
        abi.restype, abi.argtypes = FUNCTIONS["odek_abi_version"]
        found = int(abi())
        if found != ABI_VERSION:
            raise AbiVersionError(
                f"{path} implements odek ABI version {found}, but this Python binding "
                f"needs version {ABI_VERSION}; install a matching odek package or "
                "point ODEK_LIB at a matching libodek.so",
                path=str(path),
                found=found,
                expected=ABI_VERSION,
            )
        try:
            declare(handle)
        except AttributeError as e:
            raise LibraryError(
                f"{path} lacks a symbol this binding needs ({e}); it is not a matching libodek.so"
            ) from e
        _lib_path = path
        _lib = handle
        return handle


def require(name: str) -> Any:
    """The declared function ``name`` of the loaded library.

    Raises:
        MissingFunctionError: the library predates ``name`` (one of
            :data:`ADDED_IN_ABI_1`): it says which feature needs it and how
            to get a newer library.
    """
    L = lib()
    try:
        return getattr(L, name)
    except AttributeError:
        pass
    feature = ADDED_IN_ABI_1.get(name, name)
    raise MissingFunctionError(
        f"{_lib_path} has no {name}, which {feature} needs: it is an older libodek "
        f"(ABI {ABI_VERSION}, from before {name} was added); install a newer odek "
        "package or point ODEK_LIB at a newer libodek.so",
        path=str(_lib_path),
        function=name,
    )


def library_path() -> Path:
    """The path the library was loaded from (loads it if needed)."""
    lib()
    assert _lib_path is not None
    return _lib_path


# --- call helpers --------------------------------------------------------------------


def check(err: Any) -> None:
    """Raises the exception for an ``odek_error_t*`` (freeing it); NULL is success."""
    if not err:
        return
    from ._errors import error_from

    L = lib()
    try:
        code = int(L.odek_error_code(err))
        cls = (L.odek_error_class(err) or b"").decode("utf-8", "replace")
        msg = (L.odek_error_message(err) or b"").decode("utf-8", "replace")
    finally:
        L.odek_error_free(err)
    raise error_from(code, cls, msg)


def take_string(p: Any) -> str:
    """Copies an odek-owned ``char*`` into a Python str and frees it at once."""
    if not p:
        return ""
    L = lib()
    try:
        return ctypes.string_at(p).decode("utf-8", "replace")
    finally:
        L.odek_string_free(p)


def cstr(value: str, what: str) -> bytes:
    """A Python str as a NUL-terminated UTF-8 argument (interior NUL refused)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    b = value.encode("utf-8")
    if b"\0" in b:
        raise ValueError(f"{what} contains a NUL character")
    return b


def call_str(fn_name: str, *args: Any) -> str:
    """Calls ``fn(*args, &out)`` and returns the freed-at-once string ``out``."""
    L = lib()
    out = OwnedStr()
    err = getattr(L, fn_name)(*args, ctypes.byref(out))
    check(err)
    return take_string(out)


def call_str_required(fn_name: str, *args: Any) -> str:
    """:func:`call_str` of a function of :data:`ADDED_IN_ABI_1`
    (:class:`MissingFunctionError` when the library predates it)."""
    fn = require(fn_name)
    out = OwnedStr()
    check(fn(*args, ctypes.byref(out)))
    return take_string(out)


def version() -> str:
    """The odek release the loaded library was built from, e.g. ``"0.1.0"``."""
    v = lib().odek_version()
    return (v or b"").decode("utf-8", "replace")


def abi_version() -> int:
    """``odek_abi_version()`` of the loaded library."""
    return int(lib().odek_abi_version())


__all__ = [
    "ABI_VERSION",
    "EXEC_OUTPUT_LIMIT",
    "FUNCTIONS",
    "LibraryError",
    "AbiVersionError",
    "MissingFunctionError",
    "find_library",
    "lib",
    "library_path",
    "version",
    "abi_version",
]
