"""The medium's bulk ``links`` command and ``fidelity``'s ``since`` (no process, no lab)."""

from __future__ import annotations

import pytest

from manetkit.lab.medium.lag import LagRecorder
from manetkit.lab.medium.server import MediumServer
from manetkit.lab.scenario import scenario_from_dict


def _server(tmp_path, positions: dict[str, list[float]], links: list | None = None):
    sc = scenario_from_dict(
        {
            "nodes": len(positions),
            "mobility": {"model": "static", "positions": positions},
            "links": links or [],
        },
        "t.yaml",
        tmp_path,
    )
    return MediumServer(sc, "lt", tmp_path / "m.sock", tmp_path / "c.sock", None)


def test_links_lists_reception_pairs_once_with_power_and_cs_pairs_apart(tmp_path):
    # n1-n2 200 m (reception), n2-n3 300 m (carrier sense only), n1-n3 500 m (cs only),
    # n4 1 km away from everyone (nothing).
    srv = _server(tmp_path, {"n1": [0, 0], "n2": [200, 0], "n3": [500, 0], "n4": [0, 1000]})
    reply = srv.command({"cmd": "links", "cs": True})
    assert reply["ok"] and reply["fields"] == ["a", "b", "rssi_dbm"]
    assert [tuple(row[:2]) for row in reply["links"]] == [("n1", "n2")]
    assert -70 < reply["links"][0][2] < -55
    assert sorted(map(tuple, reply["cs"])) == [("n1", "n3"), ("n2", "n3")]
    assert "cs" not in srv.command({"cmd": "links"})  # only when asked
    r = reply["ranges"]
    assert r["rx_m"] == pytest.approx(250, abs=1) and r["cs_m"] == pytest.approx(550, abs=1)
    assert r["rx_threshold_dbm"] == pytest.approx(-64.4, abs=0.1)


def test_links_follow_forced_link_states(tmp_path):
    srv = _server(tmp_path, {"n1": [0, 0], "n2": [200, 0], "n3": [400, 0]})
    srv.command({"cmd": "link", "a": "n1", "b": "n2", "state": "down"})
    srv.command({"cmd": "link", "a": "n1", "b": "n3", "state": "up"})
    reply = srv.command({"cmd": "links", "cs": True})
    assert {(a, b) for a, b, _ in reply["links"]} == {("n1", "n3"), ("n2", "n3")}
    assert ["n1", "n2"] in reply["cs"]  # the obstacle keeps the pair in carrier-sense range


def test_fidelity_since_returns_only_the_newer_seconds(tmp_path):
    rec = LagRecorder()
    for sec in range(10):
        rec.record(sec + 0.5, sec + 0.4999)
    assert [r[0] for r in rec.to_wire()["seconds"]] == list(range(10))
    assert [r[0] for r in rec.to_wire(since=7)["seconds"]] == [7, 8, 9]
    assert rec.to_wire(since=7)["counts"] == rec.to_wire()["counts"]  # histogram is whole
    srv = _server(tmp_path, {"n1": [0, 0], "n2": [200, 0]})
    srv.lag = rec
    assert [r[0] for r in srv.command({"cmd": "fidelity", "since": 8})["lag"]["seconds"]] == [8, 9]
    with pytest.raises(ValueError, match="since"):
        srv.command({"cmd": "fidelity", "since": "yesterday"})
