"""File tools: read, write, edit and list files inside a sandbox
(``odek_read_file``, ``odek_write_file``, ``odek_edit_file``,
``odek_list_directory``; docs/SANDBOXING.md "File tools").

Each runs inside the sandbox as its command user, with its mounts: a path
(absolute, or relative to ``/workspace``) and every symlink in it resolve in
the sandbox, never on the host; a read-only workspace refuses a write. They
need odek's supervisor in the sandbox (the default); without it, or on the
host, they raise :class:`odek.FileError` and nothing is done.
"""

from __future__ import annotations

import base64
import json as _json
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _cancel, _ffi
from ._cancel import CancelToken
from ._types import _parse

__all__ = [
    "FILE_READ_LIMIT",
    "FILE_WRITE_LIMIT",
    "FileContent",
    "FileWritten",
    "FileEdited",
    "DirEntry",
    "DirectoryListing",
]

#: Most bytes one :meth:`odek.Sandbox.read_file` returns (4 MiB).
FILE_READ_LIMIT = 4 << 20
#: Most bytes :meth:`odek.Sandbox.write_file` writes, and the largest file
#: :meth:`odek.Sandbox.edit_file` edits (16 MiB).
FILE_WRITE_LIMIT = 16 << 20


@dataclass(frozen=True)
class FileContent:
    """What :meth:`odek.Sandbox.read_file` read.

    Attributes:
        path (str): the file (absolute, inside the sandbox).
        content (str | bytes): the piece read: ``str`` for text, ``bytes``
            with ``binary=True``.
        size (int): the file's whole size in bytes.
        offset (int): the first byte read.
        length (int): bytes read (a text piece that would end inside a UTF-8
            character ends before it).
        truncated (bool): the file goes on after this piece.
        next_offset (int | None): where the next piece starts when truncated.
        limit (int): most bytes one call returns (4 MiB).
    """

    path: str
    content: Union[str, bytes] = field(repr=False)
    size: int
    offset: int
    length: int
    truncated: bool
    next_offset: Optional[int]
    limit: int


@dataclass(frozen=True)
class FileWritten:
    """What :meth:`odek.Sandbox.write_file` wrote.

    Attributes:
        path (str): the file written (absolute, symlinks resolved in the sandbox).
        bytes_written (int): bytes written.
        created (bool): the file did not exist before.
    """

    path: str
    bytes_written: int
    created: bool


@dataclass(frozen=True)
class FileEdited:
    """What :meth:`odek.Sandbox.edit_file` changed.

    Attributes:
        path (str): the file edited.
        diff (str): the change as a unified diff (empty: nothing changed,
            nothing written), at most 256 KiB.
        edits (int): edits applied.
        diff_truncated (bool): the diff was cut (the edit was applied in
            full: read the file for the rest).
    """

    path: str
    diff: str = field(repr=False)
    edits: int
    diff_truncated: bool = False


@dataclass(frozen=True)
class DirEntry:
    """One entry of a :class:`DirectoryListing`.

    Attributes:
        name (str): the entry's name.
        type (str): ``"file"``, ``"dir"``, ``"symlink"`` (not followed) or ``"other"``.
        size (int | None): a regular file's size.
        target (str | None): a symlink's target as written in the link.
    """

    name: str
    type: str
    size: Optional[int]
    target: Optional[str]


@dataclass(frozen=True)
class DirectoryListing:
    """What :meth:`odek.Sandbox.list_directory` found.

    Attributes:
        path (str): the directory (absolute, inside the sandbox).
        entries (tuple[DirEntry, ...]): sorted by name; at most 10000, the
            first by name.
        listing (str): one line per entry, ``[FILE] name``, ``[DIR] name``,
            ``[SYMLINK] name -> target`` or ``[OTHER] name``; when
            ``truncated``, a last line says how many were left out.
        total (int): the directory's entries (more than ``entries`` when
            ``truncated``).
        truncated (bool): ``entries`` holds only the first of them.
    """

    path: str
    entries: Tuple[DirEntry, ...]
    listing: str
    total: int = 0
    truncated: bool = False


def _call(fn: str, h: Any, request: Mapping[str, Any], cancel: Optional[CancelToken],
          schema: str) -> Any:
    out = _ffi.call_str_required(fn, h, _json.dumps(request).encode(), _cancel.arg(cancel))
    return _parse(out, schema, fn)


def read_file(h: Any, path: str, *, binary: bool = False, offset: Optional[int] = None,
              length: Optional[int] = None, cancel: Optional[CancelToken] = None) -> FileContent:
    req: Dict[str, Any] = {"schema": "odek.read-file-request/1", "path": path,
                 "encoding": "base64" if binary else "utf-8"}
    if offset is not None:
        req["offset"] = offset
    if length is not None:
        req["length"] = length
    d = _call("odek_read_file", h, req, cancel, "odek.read-file-result")
    content: Union[str, bytes] = base64.b64decode(d["content"]) if binary else d["content"]
    return FileContent(d["path"], content, d["size"], d["offset"], d["length"], d["truncated"],
                       d["next_offset"], d["limit"])


def write_file(h: Any, path: str, content: Union[str, bytes], *,
               cancel: Optional[CancelToken] = None) -> FileWritten:
    if isinstance(content, str):
        req = {"path": path, "content": content, "encoding": "utf-8"}
    elif isinstance(content, (bytes, bytearray, memoryview)):
        req = {"path": path, "content": base64.b64encode(bytes(content)).decode("ascii"),
               "encoding": "base64"}
    else:
        raise TypeError(f"content must be str or bytes, not {type(content).__name__}")
    req["schema"] = "odek.write-file-request/1"
    d = _call("odek_write_file", h, req, cancel, "odek.write-file-result")
    return FileWritten(d["path"], d["bytes_written"], d["created"])


def edit_file(h: Any, path: str, edits: Sequence[Union[Tuple[str, str], Mapping[str, str]]], *,
              cancel: Optional[CancelToken] = None) -> FileEdited:
    wire = []
    for e in edits:
        if isinstance(e, Mapping):
            wire.append({"oldText": e["oldText"], "newText": e["newText"]})
        else:
            old, new = e
            wire.append({"oldText": old, "newText": new})
    req = {"schema": "odek.edit-file-request/1", "path": path, "edits": wire}
    d = _call("odek_edit_file", h, req, cancel, "odek.edit-file-result")
    return FileEdited(d["path"], d["diff"], d["edits"], d.get("diff_truncated", False))


def list_directory(h: Any, path: str = ".", *,
                   cancel: Optional[CancelToken] = None) -> DirectoryListing:
    req = {"schema": "odek.list-directory-request/1", "path": path}
    d = _call("odek_list_directory", h, req, cancel, "odek.list-directory-result")
    entries = tuple(DirEntry(e["name"], e["type"], e["size"], e["target"]) for e in d["entries"])
    return DirectoryListing(d["path"], entries, d["listing"], d.get("total", len(entries)),
                            d.get("truncated", False))
