"""The medium as a real process: radios over AF_UNIX datagrams, the control socket,
malformed input counted, sockets removed on SIGTERM. No namespaces needed."""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from manetkit import procs
from manetkit.errors import UserError
from manetkit.lab.fidelity import Reading
from manetkit.lab.medium import protocol as p
from manetkit.lab.medium.control import control
from manetkit.lab.medium.server import standalone_argv
from tests.helpers.lab import wait_for
from tests.helpers.users import as_user

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
        standalone_argv(scen, lab="mtest", socket=sock, control=ctl, ground_truth=gt),
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
    # fidelity: every output handed out was timed against its virtual schedule
    fid = Reading.from_medium(control(ctl, {"cmd": "fidelity"}))
    outputs = stats["medium"]["delivered"] + 1  # + the failed unicast's status
    assert sum(fid.lag_counts) == outputs and fid.seconds
    assert fid.unmodelled == {"medium_send_drops": 0, "medium_send_errors": 0}

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


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as other users")
def test_move_and_link_need_root_or_the_control_group():
    """Local control (docs/architecture.md): the control socket is 0660 (group --control-group) and
    the commands that change the world are refused to other users, with a clear error."""
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o755)
        tmp = Path(d)
        (tmp / "s.yaml").write_text(SCEN)
        ctl = tmp / "ctl.sock"
        argv = [sys.executable, "-m", "manetkit.lab.medium.server", str(tmp / "s.yaml")]
        argv += ["--lab", "macc", "--socket", str(tmp / "m.sock"), "--control", str(ctl)]
        argv += ["--ground-truth", str(tmp / "gt.jsonl"), "--control-group", "nogroup"]
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        try:
            wait_for(lambda: ctl.exists() and _pings(ctl), 20, "the medium's control socket")
            st = os.stat(ctl)
            assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == 65534
            move = {"cmd": "move", "node": "n3", "x": 10, "y": 0}
            positions = {"cmd": "positions"}
            # A member of the group moves nodes; another user cannot even connect.
            assert as_user(65534, 65534, ctl, [move])[0]["ok"] is True
            assert as_user(4242, 4242, ctl, [move]) == [{"connect_error": errno.EACCES}]
            # Reachable (mode opened by hand) but not root nor in the group: it may look,
            # not move or cut links.
            os.chmod(ctl, 0o666)
            link = {"cmd": "link", "a": "n1", "b": "n2", "state": "down"}
            got = as_user(4242, 4242, ctl, [positions, move, link])
            assert got[0]["ok"] is True and got[0]["positions"]["n3"] == [10.0, 0.0]
            for reply, cmd in ((got[1], "move"), (got[2], "link")):
                assert reply["ok"] is False
                assert (
                    f"cmd '{cmd}' changes state" in reply["error"] and "uid 4242" in reply["error"]
                )
            assert control(ctl, positions)["positions"]["n3"] == [10.0, 0.0]
        finally:
            procs.stop(proc)
        assert not ctl.exists()
