"""The daemon's status as a typed model (manetkit/daemonstatus.py): what the shell
builds is what the model declares, the wire form reads back unchanged, the one client's
errors name the socket and the field, and the questions readers ask of it.

The engines' own statuses are checked against the model on the seeded engine traces
(tests/daemon/test_engine_traces.py)."""

from __future__ import annotations

import argparse
import json
import socket
import threading
from ipaddress import IPv4Address
from pathlib import Path

import pytest

from manetkit import daemonstatus
from manetkit.daemon import statuscli
from manetkit.daemon.config import DaemonConfig
from manetkit.daemon.shell import Daemon
from manetkit.daemonstatus import (
    AodvStatus,
    DaemonStatus,
    SmrStatus,
    StaticStatus,
    StatusError,
    fetch_status,
    parse_reply,
    undeclared,
)
from manetkit.experiment.plugins.atra import atra_counters
from tests.helpers.statuses import make_status, neighbour, status_wire
from tests.security.test_shell_auth import FakeDataPlane

N1, N2, N9 = (IPv4Address(f"10.42.0.{i}") for i in (1, 2, 9))


def _daemon(tmp_path: Path, protocol: str, **cfg: object) -> Daemon:
    data = {"address": str(N1), "protocol": protocol, "event_socket": str(tmp_path / "e.sock")}
    d = Daemon(DaemonConfig.model_validate({**data, **cfg}))
    d.dp = FakeDataPlane()  # type: ignore[assignment]
    return d


@pytest.mark.parametrize("protocol", ["dsr", "smr", "aodv", "static"])
def test_the_shell_builds_a_status_whose_every_field_is_declared(tmp_path, protocol):
    cfg: dict[str, object] = {"static_neighbours": {str(N2): "02:00:00:00:00:02"}}
    if protocol == "static":
        cfg["static_routes"] = {str(N9): str(N2)}
    else:
        cfg["atra"] = {"rfp": True, "pre": True}
        cfg["link_sensing"] = {"backend": "lab"}  # RFP needs received powers
        cfg["lab"] = {"name": "lt", "node": "n1"}
    d = _daemon(tmp_path, protocol, **cfg)
    d._now = 1.0
    if protocol != "static":
        d.engine.rediscover(1.0, N9)  # a discovery under way
    st = d.status()
    assert undeclared(st) == []
    wire = json.loads(json.dumps(st.to_wire()))  # JSON as the event socket writes it
    assert DaemonStatus.from_wire(wire).to_wire() == wire
    assert wire["engine"]["protocol"] == protocol and wire["protocol"] == protocol
    assert [n["address"] for n in wire["neighbours"]] == [str(N2)]
    if protocol == "static":
        assert isinstance(st.engine, StaticStatus) and st.atra is None
        assert wire["engine"]["routes"] == [{"dst": str(N9), "next_hop": str(N2), "up": True}]
    else:
        assert st.atra is not None and st.atra.rfp and st.atra.pre and not st.atra.srp
        assert "atra" in wire["engine"]
        assert wire["engine"]["link_quality"]["veto"]  # the veto is on by default


def test_a_field_the_model_does_not_know_is_kept_and_listed():
    wire = status_wire("aodv", extra_top=1, engine={"new_part": {"x": 1}})
    st = DaemonStatus.from_wire(wire)
    assert undeclared(st) == ["extra_top", "engine.new_part"]
    assert st.to_wire() == wire  # an older reader passes a newer daemon's fields on


def test_a_wrong_field_is_named():
    wire = status_wire("aodv", engine={"routes": [{"dst": "10.42.0.2", "state": "valid"}]})
    with pytest.raises(StatusError, match=r"engine\.aodv\.routes\.0\.next_hop: Field required"):
        DaemonStatus.from_wire(wire)
    with pytest.raises(StatusError, match=r"engine: .*'protocol'"):
        DaemonStatus.from_wire(status_wire("aodv", engine={"protocol": "olsr"}))


def test_the_client_names_the_socket_and_the_reason(tmp_path, monkeypatch):
    missing = tmp_path / "none.sock"
    with pytest.raises(StatusError, match=f"no daemon answers on {missing}"):
        fetch_status(missing, timeout=0.5)
    with pytest.raises(StatusError, match="refused status: busy"):
        parse_reply({"ok": False, "error": "busy"}, "s.sock")
    with pytest.raises(StatusError, match=r"s.sock: daemon status: uptime_s"):
        parse_reply({"ok": True, "status": status_wire(uptime_s="soon")}, "s.sock")
    seen = []

    def request(path, cmd, timeout):
        seen.append((str(path), cmd, timeout))
        return {"ok": True, "status": status_wire("smr")}

    monkeypatch.setattr(daemonstatus, "request", request)
    st = fetch_status("d.sock", 5)
    assert isinstance(st.engine, SmrStatus) and seen == [("d.sock", {"cmd": "status"}, 5)]


def _path(dst: str, *hops: str) -> dict:
    p = ["10.42.0.1", *hops]
    return {"dst": dst, "next_hop": p[1], "hops": len(p) - 1, "path": p, "age_s": 1.0,
            "idle_s": 1.0}  # fmt: skip


def test_routes_as_each_engine_holds_them():
    aodv = make_status("aodv", engine={"routes": [
        {"dst": "10.42.0.3", "next_hop": "10.42.0.2", "hops": 2, "state": "valid",
         "lifetime_s": 3.0},
        {"dst": "10.42.0.4", "next_hop": "10.42.0.2", "hops": 2, "state": "invalid",
         "lifetime_s": 3.0}]}).engine  # fmt: skip
    assert isinstance(aodv, AodvStatus)
    assert aodv.has_route("10.42.0.3") and not aodv.has_route("10.42.0.4")  # RFC 3561 2
    assert aodv.next_hop("10.42.0.3") == "10.42.0.2" and aodv.next_hop("10.42.0.4") is None
    dsr = make_status("dsr", engine={"paths": [_path("10.42.0.5", "10.42.0.5")]}).engine
    assert dsr.routed() == {"10.42.0.5"}
    backup = {"dst": "10.42.0.7", "role": "backup", "hops": 2, "age_s": 1.0,
              "path": ["10.42.0.1", "10.42.0.6", "10.42.0.7"]}  # fmt: skip
    smr = make_status("smr", engine={"paths": [_path("10.42.0.7", "10.42.0.2", "10.42.0.7")],
                                     "multipath": [backup]}).engine  # fmt: skip
    assert isinstance(smr, SmrStatus) and smr.has_route("10.42.0.7")
    # no primary in the path set: DSR's cached route is the one used
    assert smr.path_to("10.42.0.7") == ["10.42.0.1", "10.42.0.2", "10.42.0.7"]
    static = make_status("static", engine={"routes": [
        {"dst": "10.42.0.8", "next_hop": "10.42.0.2", "up": False}]}).engine  # fmt: skip
    assert static.routed() == set()


def test_neighbours_and_atra_counters():
    st = make_status(neighbours=[neighbour("10.42.0.2"), neighbour("10.42.0.3", up=False)])
    assert st.up_neighbours() == {"10.42.0.2"} and st.neighbour("10.42.0.3").up is False
    atra = {"rfp": True, "pre": False, "srp": False, "predictions": 3, "hits": 2}
    with_atra = make_status("aodv", engine={"atra": atra})
    got = atra_counters([with_atra, with_atra, st])  # st: Atra off, counts nothing
    assert got["predictions"] == 6 and got["hits"] == 4 and got["false_alarms"] == 0


def _serve_one(path: Path, reply: dict) -> threading.Thread:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)

    def serve() -> None:
        conn, _ = srv.accept()
        with conn, srv:
            conn.makefile("rb").readline()
            conn.sendall(json.dumps(reply).encode() + b"\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def test_manetkit_status_prints_the_tables_and_the_wire_form(tmp_path, capsys):
    wire = status_wire(
        "aodv",
        neighbours=[neighbour("10.42.0.2")],
        engine={"routes": [{"dst": "10.42.0.3", "next_hop": "10.42.0.2", "hops": 2,
                            "state": "valid", "lifetime_s": 2.5}],
                "counters": {"rreq-sent": 4},
                "bounds": {"route_table": {"size": 1, "limit": 512, "evicted": 0}}},
    )  # fmt: skip
    parser = argparse.ArgumentParser()
    statuscli.register(parser)
    for flags in ([], ["--json"]):
        sock = tmp_path / "e.sock"
        t = _serve_one(sock, {"ok": True, "status": wire})
        args = ["--socket", str(sock), "--proxy-socket", str(tmp_path / "no-proxy"), *flags]
        assert statuscli.main(parser.parse_args(args)) == 0
        t.join(5)
        sock.unlink()
        out = capsys.readouterr().out
        if flags:
            assert json.loads(out) == wire
        else:
            assert "routes" in out and "10.42.0.3" in out and "valid" in out
            assert "rreq-sent" in out and "route_table" in out and "512" in out


def test_an_engine_status_off_the_model_is_an_error_reply_not_a_dropped_connection(tmp_path):
    d = _daemon(tmp_path, "aodv")
    d.engine.status = lambda: {"protocol": "aodv", "routes": "none"}  # type: ignore[method-assign]
    reply = d.events.server.reply(b'{"cmd":"status"}\n', None)
    assert reply["ok"] is False and reply["error"].startswith("engine status: ")
