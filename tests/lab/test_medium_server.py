"""The medium as a real process: radios over AF_UNIX datagrams, the control socket,
malformed input counted, sockets removed on SIGTERM. No namespaces needed."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from manetkit.errors import UserError
from manetkit.lab.medium import protocol as p
from manetkit.lab.medium.control import control
from tests.helpers.lab import wait_for

SCEN = """\
nodes: 3
seed: 2
radio: {rate_mbps: 11, retry_limit: 3}
mobility: {model: static, positions: {n1: [0, 0], n2: [200, 0], n3: [400, 0]}}
"""


@pytest.fixture
def medium_proc(tmp_path):
    scen = tmp_path / "s.yaml"
    scen.write_text(SCEN)
    sock, ctl, gt = tmp_path / "m.sock", tmp_path / "ctl.sock", tmp_path / "gt.jsonl"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "manetkit.lab.medium.server",
            str(scen),
            "--lab",
            "mtest",
            "--socket",
            str(sock),
            "--control",
            str(ctl),
            "--ground-truth",
            str(gt),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: ctl.exists() and _pings(ctl), 20, "the medium's control socket")
        yield proc, sock, ctl, gt, tmp_path
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(5)


def _pings(ctl: Path) -> bool:
    try:
        return control(ctl, {"cmd": "ping"})["ok"]
    except UserError:
        return False


def radio(tmp: Path, sock: Path, node: int) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(str(tmp / f"r{node}.sock"))
    s.connect(str(sock))
    s.settimeout(2)
    s.send(p.attach(node))
    return s


def frame(src: int, dst: int | None, payload: bytes = b"x" * 100) -> bytes:
    return (
        (p.BROADCAST_MAC if dst is None else p.node_mac(dst))
        + p.node_mac(src)
        + b"\x08\x00"
        + payload
    )


def test_medium_process_end_to_end(medium_proc):
    proc, sock, ctl, gt, tmp = medium_proc
    r = {i: radio(tmp, sock, i) for i in (1, 2, 3)}
    for i in (1, 2, 3):
        assert p.parse(r[i].recv(100)) == p.Attached(i, p.node_mac(i))
    bad = radio(tmp, sock, 4)
    assert isinstance(p.parse(bad.recv(100)), p.Refused)

    # broadcast from n2 reaches n1 and n3 with the two-ray power at 200 m (-60.50 dBm)
    r[2].send(p.tx(frame(2, None, b"hello")))
    for i in (1, 3):
        msg = p.parse(r[i].recv(2000))
        assert msg.frame == frame(2, None, b"hello") and msg.rssi_dbm == pytest.approx(
            -60.5, abs=0.01
        )
    # unicast n1 -> n2 delivered; n1 -> n3 (400 m) fails after 3 retries with the frame back
    r[1].send(p.tx(frame(1, 2)))
    assert p.parse(r[2].recv(2000)).frame == frame(1, 2)
    r[1].send(p.tx(frame(1, 3)))
    st = p.parse(r[1].recv(2000))
    assert st == p.TxStatus(p.node_mac(3), 3, False, frame(1, 3))

    # malformed datagrams are counted and dropped, the medium keeps going
    r[1].send(b"\x02short")
    r[1].send(b"\x7fjunk")
    stranger = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    stranger.bind(str(tmp / "stranger.sock"))
    stranger.sendto(p.tx(frame(1, 2)), str(sock))
    assert control(ctl, {"cmd": "ping"})["ok"]
    stats = control(ctl, {"cmd": "stats"})
    assert stats["server"]["malformed"] == 2 and stats["server"]["unknown_sender"] == 1
    assert stats["server"]["refused"] == 1
    assert stats["medium"]["unicast_failed"] == 1 and stats["medium"]["broadcast"] == 1
    assert stats["attached"] == ["n1", "n2", "n3"] and stats["cpu_s"] > 0

    # control: neighbours, move, link, errors
    nb = control(ctl, {"cmd": "neighbours", "node": "n2"})
    assert [x["node"] for x in nb["neighbours"]] == ["n1", "n3"]
    assert control(ctl, {"cmd": "move", "node": "n3", "x": 100, "y": 0, "speed": None})["ok"]
    assert control(ctl, {"cmd": "positions"})["positions"]["n3"] == [100.0, 0.0]
    r[1].send(p.tx(frame(1, 3)))
    assert p.parse(r[3].recv(2000)).frame == frame(1, 3)
    assert control(ctl, {"cmd": "link", "a": "n1", "b": "n3", "state": "down"})["ok"]
    assert [x["node"] for x in control(ctl, {"cmd": "neighbours", "node": "n1"})["neighbours"]] == [
        "n2"
    ]
    for req, err in [
        ({"cmd": "move", "node": "n9", "x": 0, "y": 0}, "unknown node"),
        ({"cmd": "link", "a": "n1", "b": "n2", "state": "sideways"}, "link state"),
        ({"cmd": "fly"}, "unknown cmd"),
        ({"cmd": "move", "node": "n1"}, "missing field"),
    ]:
        reply = control(ctl, req)
        assert reply["ok"] is False and err in reply["error"]

    # ground truth: the initial chain, then the graph after the move, then after link down
    lines = [json.loads(x) for x in gt.read_text().splitlines()]
    assert lines[0]["edges"] == [["n1", "n2"], ["n2", "n3"]]
    assert ["n1", "n3"] in lines[1]["edges"]
    assert ["n1", "n3"] not in lines[-1]["edges"]

    # SIGTERM: clean exit, sockets removed
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 0
    assert not sock.exists() and not ctl.exists()
    for s in (*r.values(), bad, stranger):
        s.close()


def test_bad_scenario_exits_2_with_field_name(tmp_path):
    scen = tmp_path / "bad.yaml"
    scen.write_text("nodes: 3\nradio: {rate_mbps: 7}\n")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "manetkit.lab.medium.server",
            str(scen),
            "--lab",
            "mbad",
            "--socket",
            str(tmp_path / "a"),
            "--control",
            str(tmp_path / "b"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert "radio.rate_mbps" in proc.stderr and "Traceback" not in proc.stderr


def test_control_without_medium(tmp_path):
    with pytest.raises(UserError, match="no medium"):
        control(tmp_path / "none.sock", {"cmd": "ping"})
