"""What a Linux shared library needs from the system, read from its ELF file.

Used at build time by ``setup.py`` to tag the wheel (the highest ``GLIBC_x.y``
symbol version ``libodek.so`` needs decides ``manylinux_2_y``), and by CI to
check a built wheel's tag. Standard library only; reads ``DT_NEEDED`` from
``.dynamic`` and the version needs from ``.gnu.version_r``, the same data
``objdump -p`` / ``objdump -T`` print.

    python3 elfdeps.py path/to/libodek.so     # prints the facts and the tag
"""

from __future__ import annotations

import re
import struct
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Set, Tuple

#: e_machine -> the architecture in wheel platform tags.
ARCHES = {62: "x86_64", 183: "aarch64", 3: "i686", 40: "armv7l", 21: "ppc64le", 22: "s390x"}

#: Libraries every manylinux policy lets a wheel link against without
#: bundling them (PEP 600 / auditwheel's policy.json, the subset Rust's std uses).
MANYLINUX_LIBS = frozenset(
    {
        "libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
        "libutil.so.1", "libgcc_s.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1",
    }
)

#: Highest libgcc_s symbol version the manylinux_2_28+ policies allow.
MAX_GCC = (7, 0, 0)

SHT_DYNAMIC = 6
SHT_GNU_VERNEED = 0x6FFFFFFE
DT_NEEDED = 1


@dataclass
class ElfDeps:
    arch: str
    needed: List[str]
    #: library file -> version names it is needed at (``GLIBC_2.34``, ``GCC_3.0``)
    versions: Dict[str, Set[str]] = field(default_factory=dict)

    def max_version(self, prefix: str) -> Tuple[int, ...]:
        best: Tuple[int, ...] = ()
        for names in self.versions.values():
            for n in names:
                m = re.fullmatch(re.escape(prefix) + r"_([0-9]+(?:\.[0-9]+)*)", n)
                if m:
                    best = max(best, tuple(int(x) for x in m.group(1).split(".")))
        return best

    @property
    def glibc(self) -> Tuple[int, int]:
        v = self.max_version("GLIBC")
        return (v[0], v[1] if len(v) > 1 else 0) if v else (2, 5)

    def platform_tag(self) -> str:
        """``manylinux_2_<y>_<arch>`` when the library stays within the
        manylinux policy (only allowed system libraries, libgcc_s at most
        GCC_7.0.0), else the honest but unportable ``linux_<arch>``."""
        outside = [n for n in self.needed if n not in MANYLINUX_LIBS]
        if outside or self.max_version("GCC") > MAX_GCC:
            return f"linux_{self.arch}"
        major, minor = self.glibc
        return f"manylinux_{major}_{minor}_{self.arch}"


def read(path: str) -> ElfDeps:
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF":
        raise ValueError(f"{path} is not an ELF file")
    if data[4] != 2:
        raise ValueError(f"{path}: only 64-bit ELF is supported")
    end = "<" if data[5] == 1 else ">"
    (e_machine,) = struct.unpack_from(end + "H", data, 18)
    e_shoff, = struct.unpack_from(end + "Q", data, 40)
    e_shentsize, e_shnum = struct.unpack_from(end + "HH", data, 58)
    sections = []
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        _name, sh_type, _flags, _addr, sh_offset, sh_size, sh_link, sh_info = struct.unpack_from(
            end + "IIQQQQII", data, off
        )
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_info))

    def cstr(strtab: int, at: int) -> str:
        _t, soff, _s, _l, _i = sections[strtab]
        start = soff + at
        return data[start : data.index(b"\0", start)].decode("ascii", "replace")

    needed: List[str] = []
    versions: Dict[str, Set[str]] = {}
    for sh_type, off, size, link, info in sections:
        if sh_type == SHT_DYNAMIC:
            for at in range(off, off + size, 16):
                tag, val = struct.unpack_from(end + "qQ", data, at)
                if tag == 0:
                    break
                if tag == DT_NEEDED:
                    needed.append(cstr(link, val))
        elif sh_type == SHT_GNU_VERNEED:
            at = off
            for _ in range(info):
                _ver, cnt, file_, aux, nxt = struct.unpack_from(end + "HHIII", data, at)
                lib = cstr(link, file_)
                a = at + aux
                for _ in range(cnt):
                    _hash, _flags, _other, name, anext = struct.unpack_from(end + "IHHII", data, a)
                    versions.setdefault(lib, set()).add(cstr(link, name))
                    a += anext
                at += nxt
    arch = ARCHES.get(e_machine)
    if arch is None:
        raise ValueError(f"{path}: unknown ELF machine {e_machine}")
    return ElfDeps(arch=arch, needed=needed, versions=versions)


PT_INTERP = 3


def is_static_executable(path: str) -> bool:
    """True for a 64-bit little-endian ELF executable without a ``PT_INTERP``
    program header (no dynamic loader: it runs unchanged on glibc, musl and
    busybox images) — the check odek's core makes before it mounts the
    supervisor (``is_static_elf``)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return False
    e_type, = struct.unpack_from("<H", data, 16)
    e_phoff, = struct.unpack_from("<Q", data, 32)
    e_phentsize, e_phnum = struct.unpack_from("<HH", data, 54)
    if e_type not in (2, 3) or e_phentsize < 4:
        return False
    for i in range(e_phnum):
        at = e_phoff + i * e_phentsize
        if at + 4 > len(data):
            return False
        p_type, = struct.unpack_from("<I", data, at)
        if p_type == PT_INTERP:
            return False
    return True


def main(argv: List[str]) -> int:
    for p in argv[1:]:
        d = read(p)
        print(f"{p}: arch {d.arch}; needs {', '.join(d.needed)}")
        for lib, names in sorted(d.versions.items()):
            print(f"  {lib}: {' '.join(sorted(names))}")
        print(f"  glibc >= {d.glibc[0]}.{d.glibc[1]} -> {d.platform_tag()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
