"""The binding's wire documents against the JSON Schemas of the C ABI (no Docker).

``odek._types`` declares every JSON document the binding writes or reads as
a TypedDict; ffi/schema/*.json are derived from libodek's own types
(``cargo xtask schema``, drift-checked by ``cargo xtask header-check``). A
member added, removed or renamed on either side, or one that changes between
required and optional, fails here.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

import pytest
from conftest import REPO

from odek import _types

SCHEMA_DIR = REPO / "ffi" / "schema"


def schema_of(file: str, name: Optional[str]) -> Dict[str, Any]:
    doc = json.loads((SCHEMA_DIR / file).read_text())
    node = doc if name is None else doc["$defs"][name]
    assert node.get("type") == "object" and "properties" in node, (
        f"{file} {name or ''}: not an object schema"
    )
    return node


def members(td: type) -> set:
    return set(td.__required_keys__) | set(td.__optional_keys__)


@pytest.mark.parametrize(
    "td", list(_types.WIRE_DOCUMENTS), ids=lambda td: td.__name__
)
def test_wire_document_matches_its_schema(td: type) -> None:
    file, name = _types.WIRE_DOCUMENTS[td]
    node = schema_of(file, name)
    props = set(node["properties"])
    ours = members(td)
    assert ours - props == set(), f"{td.__name__} has members {file} does not: {sorted(ours - props)}"
    assert props - ours == set(), f"{file} has members {td.__name__} does not: {sorted(props - ours)}"
    required = set(node.get("required", []))
    assert set(td.__required_keys__) == required, (
        f"{td.__name__}: required {sorted(td.__required_keys__)}, schema {file} requires {sorted(required)}"
    )


def test_every_schema_file_has_a_wire_document() -> None:
    files = {p.name for p in SCHEMA_DIR.glob("*.json")}
    assert files, f"no schema in {SCHEMA_DIR}: run `cargo xtask schema`"
    covered = {f for f, name in _types.WIRE_DOCUMENTS.values() if name is None}
    assert files == covered, f"schemas without a document: {sorted(files - covered)}"


def test_the_check_fails_on_a_member_on_one_side_only() -> None:
    """The comparison itself: a member only here, or only in the schema, is caught."""
    from typing import TypedDict

    class Extra(_types.ExecResultDoc):  # one member more than the schema
        extra: int

    node = schema_of("exec-result.json", None)
    assert members(Extra) - set(node["properties"]) == {"extra"}

    class Fewer(TypedDict):  # one member less
        schema: str

    assert set(node["properties"]) - members(Fewer)


@pytest.mark.fake
def test_the_resolve_request_leaves_the_sandbox_default_to_libodek(monkeypatch, tmp_path) -> None:
    """The binding sends allow_host_fallback only when its caller sets it, and
    libodek's default keeps the binding's behaviour: a sandbox is required."""
    import odek
    from odek import _client

    home, work = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    work.mkdir()
    env = {"HOME": str(home)}
    with odek.Client(engine="fake") as c:
        required = c.resolve(work, {"sandbox_image": "odek-test/base:1"}, env=env)
        fallback = c.resolve(work, {"sandbox_image": "odek-test/base:1"}, env=env,
                             allow_host_fallback=True)
        assert required.mode == "explicit" and fallback.mode == "implicit"
        assert required.data["sources"]["sandbox"]["kind"] == "api"

        sent = []
        real = _client._dumps
        monkeypatch.setattr(_client, "_dumps", lambda doc, what: sent.append(doc) or real(doc, what))
        c.resolve(work, env=env)
        c.resolve(work, {"sandbox_image": "odek-test/base:1"}, env=env,
                  allow_host_fallback=True)
    assert "allow_host_fallback" not in sent[0] and "settings" not in sent[0], sent[0]
    assert sent[1]["allow_host_fallback"] is True
    assert sent[1]["settings"] == {"sandbox_image": "odek-test/base:1"}
    for doc in sent:
        assert set(doc) <= members(_types.ResolveRequestDoc)
