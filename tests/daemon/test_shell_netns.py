"""Daemon lifecycle in real namespaces: clean exit on SIGTERM/SIGINT, stale mesh0 removed."""

from __future__ import annotations

import os
import signal

import pytest

from tests.daemon.vethnet import VethMesh, wait_for

pytestmark = pytest.mark.netns


@pytest.fixture
def pair(tmp_path):
    with VethMesh(f"mktsh{os.getpid() % 1000}", 2, tmp_path) as mesh:
        yield mesh


def kernel_state(mesh: VethMesh, i: int) -> tuple[str, str]:
    links = mesh.run(i, "ip", "-o", "link", "show").stdout
    routes = mesh.run(i, "ip", "route").stdout
    return links, routes


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_removes_mesh0_and_routes(pair, sig):
    pair.start(1, static_routes={"10.42.0.2": "10.42.0.2"})
    links, routes = kernel_state(pair, 1)
    assert "mesh0" in links and "10.42.0.0/16 dev mesh0" in routes
    assert pair.stop(1, sig) == 0, pair.log(1)
    links, routes = kernel_state(pair, 1)
    assert "mesh0" not in links
    assert "10.42." not in routes
    assert not pair.sock(1).exists()  # the event socket is removed too
    assert "Traceback" not in pair.log(1)


def test_stale_mesh0_is_removed_on_start(pair):
    # A persistent TUN with an address and a route, as a crashed run might leave.
    pair.run(1, "ip", "tuntap", "add", "dev", "mesh0", "mode", "tun")
    pair.run(1, "ip", "addr", "add", "10.42.9.9/32", "dev", "mesh0")
    pair.run(1, "ip", "link", "set", "mesh0", "up")
    pair.run(1, "ip", "route", "add", "10.42.0.0/16", "dev", "mesh0")
    pair.start(1)
    pair.start(2)
    wait_for(lambda: pair.neighbours_up(1, {"10.42.0.2"}), 10, "n1 hears n2")
    wait_for(lambda: pair.neighbours_up(2, {"10.42.0.1"}), 10, "n2 hears n1")
    addrs = pair.run(1, "ip", "-4", "addr", "show", "mesh0").stdout
    assert "10.42.0.1/32" in addrs and "10.42.9.9" not in addrs
    assert pair.run(1, "ping", "-c", "1", "-W", "2", "10.42.0.2").returncode == 0
    assert "removing stale mesh0" in pair.log(1)
    pair.stop(1)
    assert "mesh0" not in kernel_state(pair, 1)[0]


def test_second_daemon_on_same_socket_is_refused(pair):
    pair.start(1)
    r = pair.run(
        1,
        "python3",
        "-m",
        "manetkit.cli",
        "daemon",
        "--config",
        str(pair.workdir / "n1.yaml"),
        check=False,
    )
    assert r.returncode == 2
    assert "event_socket" in r.stderr and "in use" in r.stderr
    assert pair.alive(1)  # the first one is untouched


def test_missing_radio_interface_is_a_clear_error(pair):
    cfg = pair.workdir / "bad.yaml"
    import yaml

    cfg.write_text(yaml.safe_dump(pair.config(1, radio_interface="nosuch0")))
    r = pair.run(1, "python3", "-m", "manetkit.cli", "daemon", "--config", str(cfg), check=False)
    assert r.returncode == 2, r.stderr
    assert "radio_interface" in r.stderr and "does not exist" in r.stderr
    assert "mesh0" not in kernel_state(pair, 1)[0]
