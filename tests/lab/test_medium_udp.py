"""The radio <-> medium transport over UDP (docker labs): the medium's ``--udp`` and the
radio's ``--medium-udp``."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from manetkit import paths
from manetkit.errors import UserError
from manetkit.lab import netns, radio
from manetkit.lab.medium import protocol as p
from manetkit.lab.medium.control import control
from manetkit.macaddr import format_mac
from tests.helpers.lab import unique_lab, wait_for

SCEN = """\
nodes: 3
seed: 4
radio: {rate_mbps: 11, retry_limit: 2}
mobility: {model: static, positions: {n1: [0, 0], n2: [200, 0], n3: [400, 0]}}
"""


def free_udp_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def frame(src: int, dst: int | None, payload: bytes = b"y" * 64) -> bytes:
    d = p.BROADCAST_MAC if dst is None else p.node_mac(dst)
    return d + p.node_mac(src) + b"\x08\x00" + payload


def _pings(ctl: Path) -> bool:
    try:
        return control(ctl, {"cmd": "ping"})["ok"]
    except UserError:
        return False


def medium_argv(scen: Path, lab: str, udp: str, tmp: Path | None = None) -> list[str]:
    argv = [sys.executable, "-m", "manetkit.lab.medium.server", str(scen), "--lab", lab]
    argv += ["--udp", udp, "-v"]
    if tmp is not None:
        argv += ["--socket", str(tmp / "m.sock"), "--control", str(tmp / "ctl.sock")]
        argv += ["--ground-truth", str(tmp / "gt.jsonl")]
    return argv


def test_medium_relays_between_udp_and_unix_radios(tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_text(SCEN)
    port = free_udp_port()
    proc = subprocess.Popen(
        medium_argv(scen, "mudp", f"127.0.0.1:{port}", tmp_path), stderr=subprocess.DEVNULL
    )
    socks: list[socket.socket] = []
    try:
        ctl = tmp_path / "ctl.sock"
        wait_for(lambda: ctl.exists() and _pings(ctl), 20, "the medium's control socket")
        r = {}
        for i in (1, 2):  # n1, n2 over UDP
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.connect(("127.0.0.1", port))
            r[i] = s
        u = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)  # n3 over the unix socket
        u.bind(str(tmp_path / "r3.sock"))
        u.connect(str(tmp_path / "m.sock"))
        r[3] = u
        socks += r.values()
        for i, s in r.items():
            s.settimeout(3)
            s.send(p.attach(i))
            assert p.parse(s.recv(100)) == p.Attached(i, p.node_mac(i))
        refused = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        socks.append(refused)
        refused.settimeout(3)
        refused.connect(("127.0.0.1", port))
        refused.send(p.attach(9))
        assert isinstance(p.parse(refused.recv(200)), p.Refused)

        # broadcast from n2 (UDP) reaches n1 (UDP) and n3 (unix) at -60.50 dBm (200 m)
        r[2].send(p.tx(frame(2, None, b"hello")))
        for i in (1, 3):
            msg = p.parse(r[i].recv(2000))
            assert msg.frame == frame(2, None, b"hello")
            assert msg.rssi_dbm == pytest.approx(-60.5, abs=0.01)
        # a full-size unicast n3 (unix) -> n2 (UDP) is delivered whole
        big = frame(3, 2, bytes(range(256)) * 5 + b"z" * 220)  # 1514 bytes
        assert len(big) == 1514
        r[3].send(p.tx(big))
        assert p.parse(r[2].recv(4000)).frame == big
        # n1 -> n3 is 400 m: the TXSTATUS failure comes back over UDP with the frame
        r[1].send(p.tx(frame(1, 3)))
        assert p.parse(r[1].recv(2000)) == p.TxStatus(p.node_mac(3), 2, False, frame(1, 3))
        # a stranger's TX over UDP is counted, not relayed
        stranger = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        socks.append(stranger)
        stranger.sendto(p.tx(frame(1, 2)), ("127.0.0.1", port))
        stats = wait_for(
            lambda: (s := control(ctl, {"cmd": "stats"}))["server"]["unknown_sender"] == 1 and s,
            what="the stranger's datagram to be counted",
        )
        assert stats["attached"] == ["n1", "n2", "n3"] and stats["server"]["refused"] == 1
        assert stats["medium"]["delivered"] == 3 and stats["medium"]["unicast_failed"] == 1
    finally:
        for s in socks:
            s.close()
        if proc.poll() is None:
            proc.terminate()
        assert proc.wait(10) == 0


def test_bad_udp_address_is_refused(tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_text(SCEN)
    for bad in ("127.0.0.1", "127.0.0.1:99999", "no-such-host.invalid:7700"):
        proc = subprocess.run(
            medium_argv(scen, "mudpbad", bad, tmp_path), capture_output=True, text=True
        )
        assert proc.returncode == 2 and "--udp" in proc.stderr, (bad, proc.stderr)
    proc = subprocess.run(
        [sys.executable, "-m", "manetkit.lab.radio", "--lab", "x", "--node", "n1"]
        + ["--medium-udp", "nowhere"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "--medium-udp" in proc.stderr


@pytest.mark.netns
@pytest.mark.parametrize("medium_first", [True, False], ids=["medium-first", "radios-first"])
def test_radios_in_namespaces_reach_a_medium_over_udp(rundir, tmp_path, medium_first):
    """Docker-like: the medium in its own namespace on a bridge (10.77.0.254), each node's
    radio reaching it over UDP through a veth; the unix socket is not used.

    ``radios-first`` is Docker Swarm, which ignores ``depends_on``: the radios' first
    ATTACHes meet a closed port, and the ICMP port unreachable that comes back makes the
    socket report an error, which uvloop answers by closing its reader for good. The
    radios must still hear the medium once it is up."""
    lab = unique_lab("mu")
    air = f"{paths.NETNS_PREFIX}{lab}-air"
    nodes = {n: paths.netns_name(lab, n) for n in ("n1", "n2")}
    scen = tmp_path / "s.yaml"
    scen.write_text(SCEN.replace("nodes: 3", "nodes: 2").replace(", n3: [400, 0]", ""))
    medium_log = tmp_path / "medium.log"
    procs: list[subprocess.Popen] = []
    made: list[str] = []
    try:
        for ns in (air, *nodes.values()):
            netns.create(ns)
            made.append(ns)
        setup = ["link add br0 type bridge", "link set br0 up", "addr add 10.77.0.254/24 dev br0"]
        netns.run(air, ["ip", "-batch", "-"], input="\n".join(setup) + "\n")
        for k, ns in enumerate(nodes.values(), start=1):
            # Created inside the node's namespace, so nothing ever appears in the root one.
            netns.run(ns, ["ip", "link", "add", "eth0", "type", "veth", "peer", "name", f"p{k}"])
            netns.run(ns, ["ip", "link", "set", f"p{k}", "netns", air])
            netns.run(air, ["ip", "link", "set", f"p{k}", "master", "br0", "up"])
            netns.run(ns, ["ip", "addr", "add", f"10.77.0.{k}/24", "dev", "eth0"])
            netns.run(ns, ["ip", "link", "set", "eth0", "up"])

        def start_medium() -> None:
            with open(medium_log, "w") as log:
                argv = medium_argv(scen, lab, "10.77.0.254:7700")
                procs.append(netns.popen(air, argv, stderr=log))
            wait_for(lambda: _pings(paths.medium_control_socket(lab)), 20, "the medium")

        def radio_stats(n: str) -> dict:
            try:
                return radio.request(paths.radio_control_socket(lab, n), {"cmd": "stats"})
            except OSError:
                return {}

        def attached(n: str) -> bool:
            return radio_stats(n).get("attached", False)

        if medium_first:
            start_medium()
        for n, ns in nodes.items():
            argv = [sys.executable, "-m", "manetkit.lab.radio", "--lab", lab, "--node", n]
            argv += ["--medium-udp", "10.77.0.254:7700"]
            procs.append(netns.popen(ns, argv, stderr=subprocess.DEVNULL))
        if not medium_first:
            for n in nodes:
                wait_for(
                    lambda n=n: radio_stats(n).get("medium_unreachable", 0) >= 2,
                    20,
                    f"{n}'s ATTACHes refused by the closed port",
                )
            start_medium()
        for n in nodes:
            wait_for(lambda n=n: attached(n), 20, f"{n}'s radio to attach over UDP")
        log_text = medium_log.read_text()
        assert "n1 attached from ('10.77.0.1'" in log_text
        assert "n2 attached from ('10.77.0.2'" in log_text

        for k, ns in enumerate(nodes.values(), start=1):
            netns.run(ns, ["ip", "addr", "add", f"10.43.9.{k}/24", "dev", "radio0"])
        ping = netns.run(nodes["n1"], ["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.43.9.2"])
        assert " 0% packet loss" in ping.stdout
        # bigger than the veth MTU once wrapped in UDP: fragmented and reassembled
        ping = netns.run(
            nodes["n1"], ["ping", "-c", "2", "-s", "1472", "-M", "do", "-W", "2", "10.43.9.2"]
        )
        assert " 0% packet loss" in ping.stdout
        stats = control(lab, {"cmd": "stats"})
        assert stats["attached"] == ["n1", "n2"] and stats["medium"]["unicast_ok"] >= 10
        st = radio.request(paths.radio_control_socket(lab, "n2"), {"cmd": "stations"})
        st = st["stations"]
        assert [s["mac"] for s in st] == [format_mac(p.node_mac(1))]
        assert st[0]["signal_dbm"] == pytest.approx(-60.5, abs=0.01)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for ns in made:
            netns.delete(ns)
    assert not netns.list_names(f"{paths.NETNS_PREFIX}{lab}-")
