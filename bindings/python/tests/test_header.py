"""The ctypes declarations and the code table against ffi/include/odek.h (no Docker).

SPEC §10.1, §10.2: the binding's view of the ABI is checked against the
checked-in header — every prototype (name, arity, each argument and return
type), every ``ODEK_E_*`` code of ``enum odek_code_t``, ``ODEK_ABI_VERSION`` and
``ODEK_EXEC_OUTPUT_LIMIT``.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from ctypes import POINTER, c_char, c_char_p, c_int32, c_size_t, c_uint32, c_void_p

import pytest
from conftest import BINDING, HEADER

import odek
from odek import _errors, _ffi

# --- parsing the header ------------------------------------------------------------


def header_text() -> str:
    return HEADER.read_text()


def strip_comments(src: str) -> str:
    src = re.sub(r"/\*.*?\*/", " ", src, flags=re.S)
    return re.sub(r"//[^\n]*", " ", src)


PROTO = re.compile(
    r"^\s*(?P<ret>[A-Za-z_][\w\s\*]*?)\s*(?P<star>\**)\s*\b(?P<name>odek_\w+)\s*\((?P<args>[^;{]*?)\)\s*;",
    re.M | re.S,
)


def prototypes() -> dict:
    """name -> (return type, [argument types]) as normalised C type strings."""
    src = strip_comments(header_text())
    protos = {}
    for m in PROTO.finditer(src):
        ret = normalise(m.group("ret") + " " + m.group("star"))
        args_src = " ".join(m.group("args").split())
        args = []
        if args_src != "void":
            for a in args_src.split(","):
                a = a.strip()
                # drop the parameter name: the last identifier not followed by '*'
                am = re.match(r"^(.*?)([A-Za-z_]\w*)$", a)
                assert am, f"cannot parse parameter {a!r} of {m.group('name')}"
                args.append(normalise(am.group(1)))
        assert m.group("name") not in protos, f"duplicate prototype {m.group('name')}"
        protos[m.group("name")] = (ret, args)
    return protos


def normalise(c_type: str) -> str:
    """'const  odek_client_t *' -> 'const odek_client_t*'."""
    t = " ".join(c_type.replace("*", " * ").split())
    return t.replace(" *", "*")


def defines() -> dict:
    return {
        m.group(1): m.group(2).strip()
        for m in re.finditer(r"^#define\s+(ODEK_\w+)\s+(.+?)\s*$", header_text(), re.M)
        if m.group(1) != "ODEK_H"
    }


def testing_prototypes() -> set:
    """Names of the functions declared under ``#if defined(ODEK_TESTING)``."""
    blocks = re.findall(r"^#if defined\(ODEK_TESTING\)\n(.*?)^#endif", header_text(), re.M | re.S)
    return {m.group("name") for b in blocks for m in PROTO.finditer(strip_comments(b))}


def enum_codes() -> dict:
    """The ``ODEK_E_*`` members of ``enum odek_code_t``: name -> value."""
    m = re.search(r"^enum odek_code_t\b.*?\{(.*?)^\};", header_text(), re.M | re.S)
    assert m, "no enum odek_code_t in the header"
    return {
        k: int(v) for k, v in re.findall(r"^\s*(ODEK_E_\w+)\s*=\s*(\d+),?\s*$", m.group(1), re.M)
    }


# The ctypes type each C type must be declared as (the ownership rules of
# odek/_ffi.py). Written here independently of the binding.
EXPECTED_CTYPES = {
    "void": None,
    "uint32_t": c_uint32,
    "int32_t": c_int32,
    "const char*": c_char_p,  # borrowed input, or static / error-owned result
    "char*": POINTER(c_char),  # owned by the caller: freed with odek_string_free
    "char**": POINTER(POINTER(c_char)),
    "odek_error_t*": POINTER(_ffi.odek_error_t),
    "const odek_error_t*": POINTER(_ffi.odek_error_t),
    "odek_client_t*": POINTER(_ffi.odek_client_t),
    "const odek_client_t*": POINTER(_ffi.odek_client_t),
    "odek_client_t**": POINTER(POINTER(_ffi.odek_client_t)),
    "odek_sandbox_t*": POINTER(_ffi.odek_sandbox_t),
    "const odek_sandbox_t*": POINTER(_ffi.odek_sandbox_t),
    "odek_sandbox_t**": POINTER(POINTER(_ffi.odek_sandbox_t)),
    "odek_cancel_t*": POINTER(_ffi.odek_cancel_t),
    "const odek_cancel_t*": POINTER(_ffi.odek_cancel_t),
    "odek_stdin_t*": POINTER(_ffi.odek_stdin_t),
    "const odek_stdin_t*": POINTER(_ffi.odek_stdin_t),
    "const uint8_t*": c_char_p,  # a bytes object's buffer; its length is passed beside it
    "size_t": c_size_t,
    "void*": c_void_p,  # user_data, handed back to the callback untouched
    "odek_output_fn": _ffi.OutputFn,  # checked against the typedef below
}


def describe_ctype(t) -> str:
    if t is None:
        return "void"
    if hasattr(t, "_type_") and isinstance(t._type_, type) and issubclass(t, ctypes._Pointer):
        return describe_ctype(t._type_) + "*"
    return t.__name__


# --- tests -------------------------------------------------------------------------


def test_header_parses_into_every_exported_function():
    protos = prototypes()
    # A sanity floor so a broken parser cannot pass vacuously.
    assert len(protos) >= 20, sorted(protos)
    for name in ("odek_resolve", "odek_exec", "odek_sandbox_destroy", "odek_error_free"):
        assert name in protos


def test_every_header_function_is_declared_and_nothing_else():
    protos = prototypes()
    assert sorted(protos) == sorted(_ffi.FUNCTIONS), (
        f"missing in _ffi.FUNCTIONS: {sorted(set(protos) - set(_ffi.FUNCTIONS))}; "
        f"not in the header: {sorted(set(_ffi.FUNCTIONS) - set(protos))}"
    )


@pytest.mark.parametrize("name", sorted(_ffi.FUNCTIONS))
def test_declaration_matches_header_prototype(name):
    protos = prototypes()
    assert name in protos, f"{name} is declared in _ffi.py but not in odek.h"
    c_ret, c_args = protos[name]
    restype, argtypes = _ffi.FUNCTIONS[name]
    for t in [c_ret, *c_args]:
        assert t in EXPECTED_CTYPES, f"{name}: C type {t!r} has no expected ctypes mapping"
    assert len(argtypes) == len(c_args), (
        f"{name}: arity {len(argtypes)} in _ffi.py, {len(c_args)} in odek.h ({c_args})"
    )
    assert restype is EXPECTED_CTYPES[c_ret], (
        f"{name}: restype {describe_ctype(restype)}, header returns {c_ret!r} "
        f"(expected {describe_ctype(EXPECTED_CTYPES[c_ret])})"
    )
    for i, (got, c) in enumerate(zip(argtypes, c_args)):
        assert got is EXPECTED_CTYPES[c], (
            f"{name} argument {i}: {describe_ctype(got)}, header says {c!r} "
            f"(expected {describe_ctype(EXPECTED_CTYPES[c])})"
        )


def test_pointer_and_integer_kinds_are_not_confused():
    # Independent of the exact mapping: pointers stay pointers, ints stay ints
    # of the same width and signedness.
    int_kinds = {"uint32_t": (4, False), "int32_t": (4, True), "size_t": (ctypes.sizeof(c_size_t), False)}
    for name, (c_ret, c_args) in prototypes().items():
        restype, argtypes = _ffi.FUNCTIONS[name]
        for c, t in [(c_ret, restype), *zip(c_args, argtypes)]:
            if c == "void*":
                assert t is c_void_p, (name, c, t)
            elif c.endswith("*"):
                assert t is c_char_p or issubclass(t, ctypes._Pointer), (name, c, t)
            elif c == "odek_output_fn":
                assert issubclass(t, ctypes._CFuncPtr), (name, c, t)
            elif c in int_kinds:
                size, signed = int_kinds[c]
                assert ctypes.sizeof(t) == size, (name, c, t)
                assert (t(-1).value < 0) == signed, (name, c, t)
            else:
                assert c == "void" and t is None, (name, c, t)


def test_opaque_types_are_the_header_typedefs():
    src = strip_comments(header_text())
    typedefs = set(re.findall(r"typedef\s+struct\s+(\w+)\s+(\w+)\s*;", src))
    assert typedefs == {
        ("odek_cancel_t", "odek_cancel_t"),
        ("odek_client_t", "odek_client_t"),
        ("odek_error_t", "odek_error_t"),
        ("odek_sandbox_t", "odek_sandbox_t"),
        ("odek_stdin_t", "odek_stdin_t"),
    }
    for _, name in typedefs:
        assert getattr(_ffi, name).__name__ == name


def test_output_callback_matches_the_header_typedef():
    src = " ".join(strip_comments(header_text()).split())
    m = re.search(r"typedef void \(\*odek_output_fn\)\(([^)]*)\);", src)
    assert m, "no odek_output_fn typedef in the header"
    params = [normalise(re.match(r"^(.*?)([A-Za-z_]\w*)$", a.strip()).group(1))
              for a in m.group(1).split(",")]
    assert params == ["void*", "int32_t", "const uint8_t*", "size_t"]
    fn = _ffi.OutputFn
    assert fn._restype_ is None
    assert fn._argtypes_ == (c_void_p, c_int32, POINTER(ctypes.c_uint8), ctypes.c_size_t)


def test_code_table_equals_header_enum():
    header_codes = {k[len("ODEK_E_"):]: v for k, v in enum_codes().items()}
    assert len(header_codes) >= 30
    assert header_codes == _errors.CODES
    # and the module constants
    for name, code in header_codes.items():
        assert getattr(_errors, "E_" + name) == code


def test_abi_version_and_output_limit_equal_header():
    d = defines()
    assert int(d["ODEK_ABI_VERSION"]) == _ffi.ABI_VERSION == odek.ABI_VERSION
    m = re.fullmatch(r"\((\d+)\s*<<\s*(\d+)\)", d["ODEK_EXEC_OUTPUT_LIMIT"])
    assert m, d["ODEK_EXEC_OUTPUT_LIMIT"]
    assert int(m.group(1)) << int(m.group(2)) == odek.EXEC_OUTPUT_LIMIT == 16 * 1024 * 1024
    assert int(d["ODEK_STREAM_STDOUT"]) == _ffi.STREAM_STDOUT
    assert int(d["ODEK_STREAM_STDERR"]) == _ffi.STREAM_STDERR
    for name, value in (("ODEK_FILE_READ_LIMIT", odek.FILE_READ_LIMIT),
                        ("ODEK_FILE_WRITE_LIMIT", odek.FILE_WRITE_LIMIT)):
        m = re.fullmatch(r"\((\d+)\s*<<\s*(\d+)\)", d[name])
        assert m and int(m.group(1)) << int(m.group(2)) == value, (name, d[name])
    assert set(d) == {"ODEK_ABI_VERSION", "ODEK_EXEC_OUTPUT_LIMIT", "ODEK_STREAM_STDOUT",
                      "ODEK_STREAM_STDERR", "ODEK_FILE_READ_LIMIT",
                      "ODEK_FILE_WRITE_LIMIT"}, "a #define the binding does not know about"



def test_loaded_library_reports_the_same_abi_and_exports_every_function():
    lib = _ffi.lib()
    assert odek.abi_version() == _ffi.ABI_VERSION
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", odek.version())
    for name in prototypes():
        assert hasattr(lib, name) or name in _ffi.TESTING_ONLY, name


def test_library_exports_no_undeclared_odek_symbol():
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed: cannot list the library's exports")
    out = subprocess.run(
        [nm, "-D", "--defined-only", str(odek.library_path())],
        capture_output=True, text=True, check=True,
    ).stdout
    exported = {line.split()[-1] for line in out.splitlines() if line.split()[-1].startswith("odek_")}
    # A test build (cargo feature `testing`) also exports the ODEK_TESTING
    # functions; a release build exports none of them.
    testing = testing_prototypes()
    assert testing == _ffi.TESTING_ONLY
    assert exported & testing in (set(), testing), f"some test exports only: {exported & testing}"
    assert exported | testing == set(prototypes()), (
        f"exported but not in the header: {sorted(exported - set(prototypes()))}; "
        f"in the header but not exported: {sorted(set(prototypes()) - exported - testing)}"
    )
    # the fake engine comes and goes with the test exports
    fake_ok = True
    try:
        odek.Client(engine="fake").close()
    except odek.UsageError as e:
        assert "test builds" in e.message, e
        fake_ok = False
    assert fake_ok == bool(exported & testing)


# --- exceptions per code -------------------------------------------------------------


@pytest.mark.parametrize("name,code", sorted(_errors.CODES.items(), key=lambda kv: kv[1]))
def test_every_code_maps_to_its_failure_class_exception(name, code):
    e = _errors.error_from(code, "x", "msg")
    assert isinstance(e, odek.OdekError)
    assert (e.code, e.message, e.name) == (code, "msg", name)
    area = code // 100
    expected = {
        1: odek.UsageError,
        2: odek.ConfigError,
        3: odek.ApprovalError,
        4: odek.DockerRejectedError,
        5: odek.ImageUnavailableError,
        6: odek.DaemonUnreachableError,
        7: odek.CancelledError,
    }[area]
    assert isinstance(e, expected)
    if area == 3:
        assert isinstance(e, odek.ConfigError)  # approval is class config (SPEC §6.3)
    assert isinstance(e, odek.InvalidHandleError) == (code == 103)
    assert isinstance(e, odek.ApprovalRequiredError) == (code == 300)


def test_exceptions_pickle_and_render():
    import pickle

    e = _errors.error_from(202, "config", "sandbox_network must be none or bridge")
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is odek.ConfigError and e2.code == 202 and e2.failure_class == "config"
    assert "202" in str(e) and "NETWORK_MODE" in str(e) and "config" in str(e)


# --- library discovery -------------------------------------------------------------


def run_py(code: str, **env_changes) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    for k, v in env_changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    env["PYTHONPATH"] = str(BINDING) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, env=env, timeout=60, cwd=tempfile.gettempdir(),
    )


def test_missing_library_error_names_both_ways(tmp_path):
    r = run_py(
        """
        import odek
        try:
            odek.Client(engine="fake")
        except odek.LibraryError as e:
            print("ERR", e)
        """,
        ODEK_LIB=str(tmp_path / "nope" / "libodek.so"),
    )
    assert r.returncode == 0, r.stderr
    assert "ERR" in r.stdout and "ODEK_LIB" in r.stdout and "package directory" in r.stdout


def test_not_found_anywhere_error_names_both_ways(tmp_path):
    # Only the package directory and target dirs are searched; make both empty
    # by copying the package elsewhere.
    pkg = tmp_path / "site" / "odek"
    shutil.copytree(BINDING / "odek", pkg, ignore=shutil.ignore_patterns("libodek.so", "__pycache__"))
    env = dict(os.environ)
    env.pop("ODEK_LIB", None)
    env.pop("CARGO_TARGET_DIR", None)
    env["PYTHONPATH"] = str(tmp_path / "site")
    r = subprocess.run(
        [sys.executable, "-c", "import odek\ntry:\n odek.version()\nexcept odek.LibraryError as e:\n print('ERR', e)"],
        capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert "ERR cannot find libodek.so" in r.stdout
    assert "ODEK_LIB" in r.stdout and "package directory" in r.stdout
    # an installed package names no workspace path it could not have
    assert "target" not in r.stdout and "Tried" not in r.stdout, r.stdout


def test_library_inside_the_package_is_found(tmp_path):
    pkg = tmp_path / "site" / "odek"
    shutil.copytree(BINDING / "odek", pkg, ignore=shutil.ignore_patterns("libodek.so", "__pycache__"))
    shutil.copy(odek.library_path(), pkg / "libodek.so")
    env = dict(os.environ)
    env.pop("ODEK_LIB", None)
    env["PYTHONPATH"] = str(tmp_path / "site")
    r = subprocess.run(
        [sys.executable, "-c", "import odek; print(odek.library_path()); print(odek.abi_version())"],
        capture_output=True, text=True, env=env, timeout=60, cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(pkg / "libodek.so"), str(_ffi.ABI_VERSION)]


def test_development_fallback_finds_the_workspace_build():
    r = run_py(
        "import odek, odek._ffi as f; print(odek.library_path()); "
        "print([str(p) for p in f.candidate_paths() if p.is_file()][0])",
        ODEK_LIB=None,
    )
    assert r.returncode == 0, r.stderr
    found, first = r.stdout.split()
    assert found == first and found.endswith("libodek.so")


def test_abi_version_mismatch_is_a_clear_error(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed to build the stand-in library (cargo needs one too)"
    src = tmp_path / "abi.c"
    src.write_text("unsigned int odek_abi_version(void) { return 999; }\n")
    so = tmp_path / "libodek.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    r = run_py(
        """
        import odek
        try:
            odek.Client(engine="fake")
        except odek.AbiVersionError as e:
            print("ERR", e.found, e.expected, e)
        """,
        ODEK_LIB=str(so),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"ERR 999 {_ffi.ABI_VERSION} ")
    assert "ABI version 999" in r.stdout and "ODEK_LIB" in r.stdout


def test_not_a_library_is_a_clear_error(tmp_path):
    bogus = tmp_path / "libodek.so"
    bogus.write_text("not an ELF file")
    r = run_py(
        "import odek\ntry:\n odek.version()\nexcept odek.LibraryError as e:\n print('ERR', e)",
        ODEK_LIB=str(bogus),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ERR cannot load")
