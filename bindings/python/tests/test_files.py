"""File tools through the binding (``Sandbox.read_file``, ``write_file``,
``edit_file``, ``list_directory`` and their async forms): real Docker, the
sandbox's command user uid 1000 (not the suite's own), so a file's owner on
the host shows whose write it was. Without odek's supervisor (the suite also
runs with ODEK_SUPERVISOR unset or empty) every call raises FileError and
nothing is written. A host sandbox (sandbox off, fake engine) refuses too.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from conftest import IMAGE

import odek

USER = 1000


def launch(client, workdir: str, **extra):
    os.chmod(workdir, 0o777)
    settings = {"sandbox": True, "sandbox_image": IMAGE, "sandbox_user": f"{USER}:{USER}", **extra}
    return client.launch(client.resolve(workdir, settings, read_user_config=False))


def supervised(sandbox) -> bool:
    on = sandbox.info.startup_line.endswith(" supervisor=on")
    # ODEK_SUPERVISOR naming a binary: the supervised path must be the one tested.
    assert on or not os.environ.get("ODEK_SUPERVISOR"), sandbox.info.startup_line
    return on


@pytest.mark.docker
def test_files_round_trip_in_the_sandbox_as_its_user(docker_client, docker_workdir):
    text = "".join(f"{i:08} the quick brown fox jumps over the lazy dog, café\n" for i in range(6000))
    assert len(text.encode()) > 300 * 1024
    blob = bytes(range(256)) * 300
    with launch(docker_client, docker_workdir) as sandbox:
        if not supervised(sandbox):
            with pytest.raises(odek.FileError) as e:
                sandbox.write_file("made.txt", "x")
            assert e.value.code == 217 and "ODEK_SUPERVISOR=" in e.value.message
            assert not os.path.exists(os.path.join(docker_workdir, "made.txt"))
            return
        w = sandbox.write_file("deep/big.txt", text)
        assert (w.path, w.bytes_written, w.created) == ("/workspace/deep/big.txt", len(text.encode()), True)
        host = os.path.join(docker_workdir, "deep", "big.txt")
        st = os.stat(host)
        assert (st.st_uid, st.st_gid) == (USER, USER)
        with open(host, encoding="utf-8") as f:
            assert f.read() == text
        r = sandbox.read_file("deep/big.txt")
        assert r.content == text and r.size == len(text.encode()) and not r.truncated
        piece = sandbox.read_file("/workspace/deep/big.txt", offset=9, length=20)
        assert piece.content == text[9:29] and piece.truncated and piece.next_offset == 29
        sandbox.write_file("bin/blob", blob)
        with open(os.path.join(docker_workdir, "bin", "blob"), "rb") as f:
            assert f.read() == blob
        assert sandbox.read_file("bin/blob", binary=True).content == blob
        with pytest.raises(odek.FileError) as e:
            sandbox.read_file("bin/blob")
        assert "base64" in e.value.message
        with open(os.path.join(docker_workdir, "a.py"), "w") as f:
            f.write("x = 1\ny = 2\nx = 1\n")
        with pytest.raises(odek.FileError) as e:
            sandbox.edit_file("a.py", [("x = 1", "x = 2")])
        assert "more than once" in e.value.message
        d = sandbox.edit_file("a.py", [{"oldText": "y = 2", "newText": "y = 3"}])
        assert "-y = 2\n+y = 3\n" in d.diff
        listing = sandbox.list_directory()
        assert [(e.name, e.type) for e in listing.entries] == [("a.py", "file"), ("bin", "dir"), ("deep", "dir")]

        assert listing.listing.splitlines()[0] == "[FILE] a.py"


@pytest.mark.docker
def test_async_file_tools_and_a_read_only_workspace(docker_workdir):
    async def go():
        os.chmod(docker_workdir, 0o777)
        settings = {"sandbox": True, "sandbox_image": IMAGE, "sandbox_user": f"{USER}:{USER}",
                    "sandbox_readonly": True}
        async with odek.launch_async(docker_workdir, settings, read_user_config=False) as sandbox:
            on = (await sandbox.describe()).environment["supervisor"]["on"]
            assert on or not os.environ.get("ODEK_SUPERVISOR")
            if not on:
                with pytest.raises(odek.FileError):
                    await sandbox.read_file("x")
                return
            with pytest.raises(odek.FileError) as e:
                await sandbox.write_file("new.txt", "x")
            assert "sandbox_readonly" in e.value.message and "EROFS" in e.value.message
            assert not os.path.exists(os.path.join(docker_workdir, "new.txt"))
            w = await sandbox.write_file("/tmp/ok.txt", b"\x00\x01")
            assert w.created
            r = await sandbox.read_file("/tmp/ok.txt", binary=True)
            assert r.content == b"\x00\x01"
            assert (await sandbox.list_directory("/tmp")).entries[0].name == "ok.txt"

    asyncio.run(go())


def test_a_host_sandbox_refuses_file_tools(fake_client, workdir):
    plan = fake_client.resolve(workdir, {"sandbox": False}, read_user_config=False)
    with fake_client.launch(plan) as sandbox:
        with pytest.raises(odek.FileError) as e:
            sandbox.write_file("made.txt", "x")
        assert e.value.code == odek.CODES["FILE"] and "on the host" in e.value.message
        assert not os.path.exists(os.path.join(workdir, "made.txt"))
