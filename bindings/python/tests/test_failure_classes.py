"""Every failure class of SPEC §6.3 surfaces as its exception type.

config and approval run on the fake engine; daemon-unreachable needs no
daemon (a socket that does not exist); image-unavailable and docker-rejected
need the real engine and check that no container is left behind.
"""

from __future__ import annotations

import os

import pytest
from conftest import FAKE_IMAGE, IMAGE, containers_for, write_project_config

import odek

# A registry on a closed local port: the pull fails fast, nothing leaves the machine.
MISSING_IMAGE = "127.0.0.1:1/missing:1"


def test_config_class(fake_client, workdir):
    with pytest.raises(odek.ConfigError) as ei:
        fake_client.resolve(workdir, {"sandbox_image": FAKE_IMAGE, "sandbox_network": "host"})
    e = ei.value
    assert type(e) is odek.ConfigError
    assert (e.code, e.failure_class) == (odek.CODES["NETWORK_MODE"], "config")
    assert "sandbox_networks" in e.message  # points to the way to attach networks


def test_approval_class(fake_client, workdir):
    write_project_config(workdir, {"sandbox_compose_project": "shop", "sandbox_image": FAKE_IMAGE})
    plan = fake_client.resolve(workdir)
    with pytest.raises(odek.ApprovalRequiredError) as ei:
        fake_client.launch(plan)
    e = ei.value
    assert isinstance(e, odek.ApprovalError) and isinstance(e, odek.ConfigError)
    assert (e.code, e.failure_class) == (300, "config")


def test_daemon_unreachable_class(workdir):
    with odek.Client(docker_host="unix:///nonexistent.sock") as client:
        with pytest.raises(odek.DaemonUnreachableError) as ei:
            client.resolve(workdir, {"sandbox": True, "sandbox_image": IMAGE})
        e = ei.value
        assert (e.code // 100, e.failure_class) == (6, "daemon-unreachable")
        assert "/nonexistent.sock" in e.message
        with pytest.raises(odek.DaemonUnreachableError):
            odek.launch(workdir, {"sandbox": True, "sandbox_image": IMAGE}, client=client)


def test_daemon_unreachable_implicit_mode_falls_back_loudly(workdir):
    # implicit mode + unreachable daemon = loud fallback (SPEC §6.3); launch it
    # but never exec: that would run on the host.
    with odek.Client(docker_host="unix:///nonexistent.sock") as client:
        # the binding requires a sandbox unless told otherwise
        with pytest.raises(odek.DaemonUnreachableError):
            client.resolve(workdir, {"sandbox_image": IMAGE})
        plan = client.resolve(workdir, {"sandbox_image": IMAGE}, allow_host_fallback=True)
        assert plan.isolation == "fallback" and plan.mode == "implicit"
        assert plan.fallback_reason and "nonexistent.sock" in plan.fallback_reason
        with pytest.warns(odek.HostFallbackWarning), client.launch(plan) as sandbox:
            assert sandbox.isolation == "fallback" and sandbox.container_id is None
            d = sandbox.describe()
            assert d.isolation == "fallback"
            assert "host" in d.prompt.lower()
        # with a network configured, fallback is impossible
        with pytest.raises(odek.DaemonUnreachableError):
            client.resolve(workdir, {"sandbox_image": IMAGE, "sandbox_networks": ["somenet"]})


@pytest.mark.docker
def test_image_unavailable_class(docker_client, docker_workdir):
    with pytest.raises(odek.ImageUnavailableError) as ei:
        with odek.launch(docker_workdir, {"sandbox": True, "sandbox_image": MISSING_IMAGE},
                         client=docker_client):
            pytest.fail("launched a sandbox from an image that cannot be pulled")
    e = ei.value
    assert (e.code, e.failure_class) == (odek.CODES["IMAGE_UNAVAILABLE"], "image-unavailable")
    assert MISSING_IMAGE in e.message
    assert containers_for(docker_workdir) == []


@pytest.mark.docker
def test_image_unavailable_implicit_mode_falls_back_loudly(docker_client, docker_workdir):
    plan = docker_client.resolve(docker_workdir, {"sandbox_image": MISSING_IMAGE},
                                 allow_host_fallback=True)
    with pytest.warns(odek.HostFallbackWarning), \
            docker_client.launch(plan) as sandbox:  # never exec: it would run on the host
        assert sandbox.isolation == "fallback"
        assert sandbox.container_id is None
        assert any("host" in w.message.lower() for w in sandbox.info.warnings) or \
            "host" in sandbox.describe().prompt.lower()
    assert containers_for(docker_workdir) == []


@pytest.mark.docker
def test_docker_rejected_class(docker_client, docker_workdir):
    # More CPUs than the host has (odek's own check allows up to 1024): Docker
    # refuses at create.
    assert (os.cpu_count() or 1) < 1000
    cpus = "1000"
    plan = docker_client.resolve(docker_workdir, {"sandbox": True, "sandbox_image": IMAGE,
                                                  "sandbox_cpus": cpus})
    with pytest.raises(odek.DockerRejectedError) as ei:
        docker_client.launch(plan)
    e = ei.value
    assert (e.code, e.failure_class) == (odek.CODES["DOCKER_REJECTED"], "docker-rejected")
    assert "create" in e.message
    assert containers_for(docker_workdir) == []


@pytest.mark.docker
def test_compose_project_not_running_is_config(docker_client, docker_workdir):
    with pytest.raises(odek.ConfigError) as ei:
        docker_client.resolve(docker_workdir, {"sandbox_image": IMAGE,
                                               "sandbox_compose_project": "odek-no-such-project"})
    assert ei.value.code == odek.CODES["COMPOSE_NOT_RUNNING"]
    assert "docker compose -p odek-no-such-project -f <compose file> up -d" in ei.value.message
