"""Routing snapshots summarised per traffic pair: route present, path, next hop reachable
(kernel neighbour state, the daemon's neighbours, the medium's ground truth)."""

from __future__ import annotations

from pathlib import Path

from manetkit.experiment import snapshots as S
from tests.helpers.statuses import neighbour, status_wire


def kernel_node(routes: list[dict], neigh: list[dict] | None = None) -> dict:
    return {"route": routes, "neigh": neigh or [], "daemon": None}


def test_a_peer_route_is_walked_hop_by_hop_through_the_kernel_tables():
    snap = {
        "time": 1000.0,
        "stack": "batmand",
        "nodes": {
            "n1": kernel_node(
                [
                    {"dst": "10.42.0.0/16", "dev": "radio0", "protocol": "kernel"},  # connected
                    {"dst": "10.42.0.2", "dev": "radio0", "table": "66"},  # on link
                    {"dst": "10.42.0.3", "gateway": "10.42.0.2", "dev": "radio0", "table": "66"},
                    {"type": "unreachable", "dst": "default", "table": "67"},
                    {"type": "local", "dst": "10.42.0.1", "table": "local"},
                ],
                [{"dst": "10.42.0.2", "dev": "radio0", "state": ["REACHABLE"]}],
            ),  # fmt: skip
            "n2": kernel_node([{"dst": "10.42.0.3", "dev": "radio0", "table": "66"}]),
            "n3": kernel_node([]),
            "n4": kernel_node([{"dst": "10.42.0.1", "gateway": "10.42.0.5", "dev": "radio0"}]),
            "n5": kernel_node([{"dst": "10.42.0.1", "gateway": "10.42.0.4", "dev": "radio0"}]),
        },
    }
    got = S.summarise(snap, [("n1", "n3"), ("n3", "n1"), ("n4", "n1")])["pairs"]
    assert got["n1-n3"] == {
        "route": True, "path": ["n1", "n2", "n3"], "complete": True, "next_hop": "n2",
        "next_hop_neigh": "REACHABLE", "next_hop_up": None,
    }  # fmt: skip
    assert got["n3-n1"]["route"] is False and got["n3-n1"]["path"] == ["n3"]
    # a loop between n4 and n5: a route at the source, but it never gets there
    assert got["n4-n1"]["path"] == ["n4", "n5"] and not got["n4-n1"]["complete"]
    assert got["n4-n1"]["next_hop_neigh"] is None  # not in n4's neighbour table


def test_a_dsr_source_route_is_the_path_and_its_next_hop_is_the_daemons_neighbour():
    path = ["10.42.0.1", "10.42.0.2", "10.42.0.3", "10.42.0.4"]
    status = status_wire(
        "dsr",
        neighbours=[neighbour("10.42.0.2"), neighbour("10.42.0.9", up=False)],
        engine={"paths": [{"dst": "10.42.0.4", "next_hop": "10.42.0.2", "hops": 3,
                           "path": path, "age_s": 1.0, "idle_s": 1.0}]},
    )  # fmt: skip
    snap = {"time": 5.0, "stack": "dsr", "nodes": {"n1": {"route": [], "neigh": [],
                                                          "daemon": status}}}  # fmt: skip
    got = S.summarise(snap, [("n1", "n4"), ("n1", "n7")])["pairs"]
    assert got["n1-n4"]["path"] == ["n1", "n2", "n3", "n4"] and got["n1-n4"]["complete"]
    assert got["n1-n4"]["next_hop_up"] is True
    assert got["n1-n7"]["route"] is False


def test_an_aodv_route_is_walked_through_each_daemons_table():
    def aodv(*routes: tuple[str, str, str]) -> dict:
        rows = [{"dst": f"10.42.0.{d[1:]}", "next_hop": f"10.42.0.{n[1:]}", "hops": 1,
                 "state": s, "lifetime_s": 3.0} for d, n, s in routes]  # fmt: skip
        nbs = [neighbour(f"10.42.0.{n[1:]}") for _, n, _ in routes]
        return {"route": [], "neigh": [],
                "daemon": status_wire("aodv", neighbours=nbs, engine={"routes": rows})}  # fmt: skip

    snap = {"time": 5.0, "stack": "aodv", "nodes": {
        "n1": aodv(("n3", "n2", "valid")), "n2": aodv(("n3", "n3", "valid")), "n3": aodv(),
        "n4": aodv(("n3", "n2", "invalid"))}}  # fmt: skip
    got = S.summarise(snap, [("n1", "n3"), ("n4", "n3")])["pairs"]
    assert got["n1-n3"]["path"] == ["n1", "n2", "n3"] and got["n1-n3"]["next_hop_up"] is True
    assert got["n4-n3"]["route"] is False  # its only route is invalid


def test_the_ground_truth_says_whether_the_next_hop_and_the_path_were_in_range():
    graph = [
        {"t": 0.0, "wall": 100.0, "edges": [["n1", "n2"], ["n2", "n3"]]},
        {"t": 5.0, "wall": 105.0, "edges": [["n2", "n3"]]},  # n1 moved away from n2
    ]
    summary = {"time": 103.0, "pairs": {"n1-n3": {"path": ["n1", "n2", "n3"], "complete": True}}}
    got = S.add_ground_truth(summary, graph)["pairs"]["n1-n3"]
    assert got["next_hop_in_range"] is True and got["path_in_range"] is True
    summary = {"time": 106.0, "pairs": {"n1-n3": {"path": ["n1", "n2", "n3"], "complete": True},
                                        "n3-n1": {"path": ["n3"], "complete": False}}}  # fmt: skip
    got = S.add_ground_truth(summary, graph)["pairs"]
    assert got["n1-n3"]["next_hop_in_range"] is False and got["n1-n3"]["path_in_range"] is False
    assert got["n3-n1"]["next_hop_in_range"] is None  # no route: nothing to judge
    assert S.in_range(graph, 99.0, "n1", "n2") is None  # before the log


def test_a_snapshot_is_kept_compressed_and_reads_back(tmp_path: Path):
    snap = {"time": 1.0, "stack": "babeld", "nodes": {"n1": kernel_node([])}}
    path = S.save(snap, tmp_path / "runs" / "x" / "snapshot-start.json.gz")
    assert path.read_bytes()[:2] == b"\x1f\x8b" and S.load(path) == snap


def test_an_error_record_is_no_status():
    snap = {"time": 5.0, "stack": "dsr",
            "nodes": {"n1": {"route": [], "neigh": [], "daemon": {"error": "TimeoutError"}}}}  # fmt: skip
    got = S.summarise(snap, [("n1", "n2")])["pairs"]["n1-n2"]
    assert got["route"] is False and got["next_hop_up"] is None
