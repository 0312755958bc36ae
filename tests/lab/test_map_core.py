"""The live map's state and read pacing (``manetkit.lab.map.core``), from fake replies:
no lab, no sockets, a fake clock."""

from __future__ import annotations

import pytest

from manetkit.daemonstatus import DaemonStatus
from manetkit.lab.map.core import (
    LabInfo,
    MapCore,
    Push,
    Rates,
    ReadFidelity,
    ReadLinks,
    ReadNode,
    ReadPositions,
    ReadRoutes,
)
from manetkit.lab.medium.lag import LagRecorder
from tests.helpers.statuses import make_status, neighbour

NODES = ("n1", "n2", "n3", "n4", "n5")


def addr(n: str) -> str:
    return f"10.42.0.{n[1:]}"


def drain(core: MapCore) -> list:
    out = []
    while (ev := core.next_event()) is not None:
        out.append(ev)
    return out


def pushes(events: list) -> list[dict]:
    return [e.message for e in events if isinstance(e, Push)]


def chain_positions(t: float = 1.0, **moved) -> dict:
    pos = {n: [200.0 * i, 0.0] for i, n in enumerate(NODES)}
    pos.update(moved)
    return {"ok": True, "t": t, "positions": pos}


def chain_links() -> dict:
    return {
        "ok": True,
        "fields": ["a", "b", "rssi_dbm", "snr_db"],
        "links": [[NODES[i], NODES[i + 1], -60.5, 30.0] for i in range(len(NODES) - 1)],
        "cs": [["n1", "n3"]],
        "ranges": {"rx_m": 250.0, "cs_m": 550.0, "rx_threshold_dbm": -64.4},
    }


def daemon_status(
    node: str,
    neighbours=(),
    paths=(),
    routes=(),
    originated=None,
    delivered=None,
    protocol="dsr",
    multipath=(),
) -> DaemonStatus:
    eng: dict = {}
    if protocol in ("dsr", "smr"):
        eng["paths"] = [
            {"dst": addr(p[-1]), "next_hop": addr(p[1]), "hops": len(p) - 1,
             "path": [addr(x) for x in p], "idle_s": idle, "age_s": 1.0}
            for p, idle in paths
        ]  # fmt: skip
        if protocol == "smr":
            eng["multipath"] = [
                {"dst": addr(p[-1]), "role": role, "hops": len(p) - 1, "age_s": 1.0,
                 "path": [addr(x) for x in p]}
                for role, p in multipath
            ]  # fmt: skip
    else:
        eng["routes"] = [
            {"dst": addr(d), "next_hop": addr(nh), "hops": 1, "state": "valid",
             "lifetime_s": 3.0, "precursors": []}
            for d, nh in routes
        ]  # fmt: skip
    return make_status(
        protocol,
        addr(node),
        neighbours=[neighbour(addr(n), up, -60.5) for n, up in neighbours],
        engine=eng,
        flows={
            "originated": {addr(k): v for k, v in (originated or {}).items()},
            "delivered": {addr(k): v for k, v in (delivered or {}).items()},
        },
    )


def open_page(core: MapCore, now: float = 0.0) -> list:
    core.pages_changed(now, 1)
    core.handle_timer(now)
    return drain(core)


def test_no_page_no_reads_then_one_read_of_each_kind_spread_over_the_period():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"), Rates(frame_s=0.1, status_s=1.0))
    core.handle_timer(0.0)
    assert drain(core) == [] and core.get_timer() is None
    first = open_page(core)
    kinds = [type(e) for e in first]
    assert kinds.count(ReadPositions) == kinds.count(ReadLinks) == kinds.count(ReadFidelity) == 1
    assert [e.node for e in first if isinstance(e, ReadNode)] == ["n1"]  # the others follow
    core.handle_timer(0.45)
    assert [e.node for e in drain(core) if isinstance(e, ReadNode)] == ["n2", "n3"]
    assert not any(isinstance(e, ReadRoutes) for e in first)  # dsr: no kernel routes


def test_a_read_is_not_repeated_while_unanswered_and_frames_follow_the_positions():
    core = MapCore(LabInfo("lt", NODES, stack="none"), Rates(frame_s=0.1))
    open_page(core)
    core.handle_timer(0.1)
    core.handle_timer(0.2)
    assert not any(isinstance(e, ReadPositions) for e in drain(core))  # still pending
    core.positions_read(0.25, chain_positions())
    frames = pushes(drain(core))
    assert len(frames) == 1 and frames[0]["positions"]["n3"] == [400.0, 0.0]
    core.handle_timer(0.301)
    assert any(isinstance(e, ReadPositions) for e in drain(core))
    core.positions_read(0.302, chain_positions())
    drain(core)
    # 10 frames a second when the medium answers at once
    n = 0
    for k in range(4, 24):
        now = k * 0.1 + 0.001
        core.handle_timer(now)
        for e in drain(core):
            if isinstance(e, ReadPositions):
                core.positions_read(now, chain_positions())
                n += len(pushes(drain(core)))
    assert n == 20


def test_no_page_stops_the_reads():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"))
    open_page(core)
    core.pages_changed(1.0, 0)
    assert core.get_timer() is None
    core.handle_timer(5.0)
    assert drain(core) == []


def test_frames_carry_only_changed_sections_and_the_snapshot_everything():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"))
    open_page(core)
    core.links_read(0.05, chain_links())
    core.positions_read(0.06, chain_positions())
    f1 = pushes(drain(core))[0]
    assert {"lab", "links", "cs", "routing"} <= set(f1)
    assert f1["lab"]["ranges"]["rx_m"] == 250.0
    core.handle_timer(0.1)
    drain(core)
    core.links_read(0.55, chain_links())  # unchanged
    core.positions_read(0.16, chain_positions())
    f2 = pushes(drain(core))[0]
    assert "links" not in f2 and "lab" not in f2 and "positions" in f2
    snap = core.snapshot(0.2)
    assert snap["full"] and len(snap["links"]) == 4 and snap["cs"] == [["n1", "n3"]]
    # rows read by the reply's fields: a column the map does not know is kept
    assert snap["links"][0] == {"a": "n1", "b": "n2", "rssi_dbm": -60.5, "snr_db": 30.0}


def test_carrier_sense_pairs_are_asked_for_every_few_links_reads():
    core = MapCore(LabInfo("lt", NODES), Rates(links_s=0.5))
    asked = []
    core.pages_changed(0.0, 1)
    for k in range(8):
        core.handle_timer(k * 0.5 + 0.001)
        for e in drain(core):
            if isinstance(e, ReadLinks):
                asked.append(e.cs)
                core.links_read(k * 0.5 + 0.002, chain_links())
    assert asked == [True, False, False, False] * 2


def test_dsr_flow_path_rates_and_the_reverse_merged():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"))
    route = ("n1", "n2", "n3", "n4", "n5")
    for t, sent, got in ((1.0, [10, 10_000], [10, 10_000]), (2.0, [110, 110_000], [100, 100_000])):
        core.node_read(
            t, "n1", daemon_status("n1", paths=[(route, 0.1)], originated={"n5": sent}), None
        )
        core.node_read(
            t,
            "n5",
            daemon_status(
                "n5", paths=[(route[::-1], 0.1)], originated={"n1": sent}, delivered={"n1": got}
            ),
            None,
        )
        # n3 forwards and learns both paths but sends nothing itself: no flow from it
        core.node_read(t, "n3", daemon_status("n3", paths=[(("n3", "n4", "n5"), 0.0)]), None)
    flows = core.flows(2.0)
    assert len(flows) == 1
    f = flows[0]
    assert (f["src"], f["dst"], f["path"], f["complete"]) == ("n1", "n5", list(route), True)
    assert f["sent_bps"] == 800_000 and f["delivered_bps"] == 720_000
    assert f["reverse"]["sent_bps"] == 800_000
    # the source stops sending: the flow goes after ACTIVE_S plus a status period
    core.node_read(
        6.0,
        "n1",
        daemon_status("n1", paths=[(route, 4.0)], originated={"n5": [110, 110_000]}),
        None,
    )
    core.node_read(6.0, "n5", daemon_status("n5", originated={"n1": [110, 110_000]}), None)
    assert core.flows(6.0) == []


def test_dsr_path_is_the_cached_route_used_last_and_a_prefix_counts():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"))
    st = daemon_status(
        "n1",
        paths=[(("n1", "n2", "n3", "n4", "n5"), 5.0), (("n1", "n2", "n4", "n5"), 0.2)],
    )
    core.node_read(1.0, "n1", st, None)
    assert core.path("n1", "n5")["path"] == ["n1", "n2", "n4", "n5"]
    assert core.path("n1", "n3")["path"] == ["n1", "n2", "n3"]
    gone = core.path("n1", "n9") if False else core.path("n2", "n5")
    assert gone["complete"] is False and gone["path"] == ["n2"]


def test_smr_primary_and_backup():
    core = MapCore(LabInfo("lt", NODES, stack="smr"))
    multipath = [("primary", ("n1", "n2", "n5")), ("backup", ("n1", "n3", "n4", "n5"))]
    st = daemon_status("n1", protocol="smr", multipath=multipath)
    core.node_read(1.0, "n1", st, None)
    p = core.path("n1", "n5")
    assert p["path"] == ["n1", "n2", "n5"] and p["backups"] == [["n1", "n3", "n4", "n5"]]
    assert p["how"] == "smr primary/backup"


def test_aodv_path_follows_each_nodes_next_hop_and_stops_at_a_gap_or_loop():
    core = MapCore(LabInfo("lt", NODES, stack="aodv"))
    tables = {
        "n1": [("n5", "n2")],
        "n2": [("n5", "n3")],
        "n3": [("n5", "n4")],
        "n4": [("n5", "n5")],
    }
    for n, routes in tables.items():
        core.node_read(1.0, n, daemon_status(n, routes=routes, protocol="aodv"), None)
    p = core.path("n1", "n5")
    assert p["path"] == list(NODES) and p["complete"] and p["how"] == "aodv next hops"
    core.node_read(2.0, "n3", daemon_status("n3", routes=[("n5", "n2")], protocol="aodv"), None)
    p = core.path("n1", "n5")
    assert p["path"] == ["n1", "n2", "n3"] and not p["complete"]  # n3 -> n2 would loop


def test_peer_stack_path_and_neighbours_from_kernel_routes():
    core = MapCore(LabInfo("lt", NODES, stack="batmand"))
    core.pages_changed(0.0, 1)
    core.handle_timer(0.0)
    assert any(isinstance(e, ReadRoutes) for e in drain(core))

    def rt(dst, via=None, proto="static"):
        return {
            "dst": dst,
            "via": via,
            "dev": "radio0",
            "table": "66",
            "protocol": proto,
            "type": "unicast",
        }

    core.routes_read(
        1.0,
        "n1",
        [rt("10.42.0.0/16", proto="kernel"), rt("10.42.0.2"), rt("10.42.0.3", "10.42.0.2")],
    )
    core.routes_read(1.0, "n2", [rt("10.42.0.1"), rt("10.42.0.3")])
    assert core.path("n1", "n3")["path"] == ["n1", "n2", "n3"]
    assert core.path("n1", "n3")["how"] == "kernel routes"
    view = core.neighbour_view()
    assert [r["node"] for r in view["n1"]] == ["n2"]
    assert sorted(r["node"] for r in view["n2"]) == ["n1", "n3"]


def test_babeld_neighbours_come_from_babeld():
    core = MapCore(LabInfo("lt", NODES, stack="babeld"))
    core.routes_read(
        1.0, "n1", [], neighbours=[{"node": "n2", "cost": 96}, {"node": None, "cost": 1}]
    )
    assert core.neighbour_view()["n1"] == [{"node": "n2", "up": True, "cost": 96}]


def test_gray_zone_is_a_pair_the_routing_believes_and_the_medium_does_not_carry():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"))
    core.node_read(0.5, "n1", daemon_status("n1", neighbours=[("n3", True)]), None)
    assert core.routing_links()[0]["medium"] is None  # no links read yet: unknown
    core.links_read(0.0, chain_links())
    core.node_read(
        1.0, "n1", daemon_status("n1", neighbours=[("n2", True), ("n3", True), ("n4", False)]), None
    )
    core.node_read(1.0, "n2", daemon_status("n2", neighbours=[("n1", True)]), None)
    rl = {(r["a"], r["b"]): r for r in core.routing_links()}
    assert set(rl) == {("n1", "n2"), ("n1", "n3")}  # n4 is down in n1's table
    assert rl[("n1", "n2")] == {"a": "n1", "b": "n2", "both": True, "medium": True}
    assert rl[("n1", "n3")]["medium"] is False and rl[("n1", "n3")]["both"] is False


def test_events_on_the_timeline_with_their_link_and_neighbour_events_left_out():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"))
    open_page(core)
    core.event_received(
        1.0,
        "n1",
        {
            "event": "route-down",
            "time": 5.0,
            "dst": addr("n5"),
            "reason": "rerr",
            "broken_link": [addr("n4"), addr("n5")],
        },
    )
    core.event_received(1.1, "n2", {"event": "neighbour-down", "neighbour": addr("n3")})
    core.event_received(
        1.2,
        "n1",
        {
            "event": "predicted-failure",
            "neighbour": addr("n2"),
            "signal_dbm": -63,
            "slope_db_per_s": -2,
            "eta_s": 1.5,
        },
    )
    core.event_received(
        1.3,
        "n1",
        {
            "event": "path-switch",
            "dst": addr("n5"),
            "from_path": [addr("n1"), addr("n2")],
            "to_path": [addr("n1"), addr("n3")],
            "reason": "link-broken",
        },
    )
    core.positions_read(1.4, chain_positions())
    frame = pushes(drain(core))[0]
    evs = frame["events"]
    assert [e["kind"] for e in evs] == ["route-down", "predicted-failure", "path-switch"]
    assert evs[0]["link"] == ["n4", "n5"] and evs[0]["dst"] == "n5" and evs[0]["at"] == 1.0
    assert evs[0]["text"] == "n1: route to n5 down (rerr, link n4-n5)"
    assert "in 1.5 s" in evs[1]["text"] and evs[1]["neighbour"] == "n2"
    assert "n1 n2 -> n1 n3" in evs[2]["text"]
    core.handle_timer(1.5)
    drain(core)
    core.positions_read(1.6, chain_positions())
    assert "events" not in pushes(drain(core))[0]  # sent once


def test_proxy_sessions_give_goodput_and_elfn_freeze_resume_events():
    core = MapCore(LabInfo("lt", NODES, stack="dsr", proxy="elfn"))

    def proxy(role, peer, state, to_app):
        return {
            "mode": "elfn",
            "sessions": [
                {
                    "session": "ab12",
                    "role": role,
                    "peer": addr(peer),
                    "dst": "10.42.0.5:5201",
                    "state": state,
                    "bytes_to_app": to_app,
                }
            ],
        }

    core.node_read(1.0, "n1", None, proxy("initiator", "n5", "flowing", 0))
    core.node_read(1.0, "n5", None, proxy("acceptor", "n1", "flowing", 0))
    core.node_read(2.0, "n1", None, proxy("initiator", "n5", "frozen", 0))
    core.node_read(2.0, "n5", None, proxy("acceptor", "n1", "flowing", 125_000))
    f = core.flows(2.0)[0]
    assert (f["src"], f["dst"], f["goodput_bps"], f["state"]) == ("n1", "n5", 1_000_000, "frozen")
    core.node_read(3.0, "n1", None, proxy("initiator", "n5", "flowing", 0))
    kinds = [e["kind"] for e in core.events]
    assert kinds == ["elfn-freeze", "elfn-resume"]
    assert core.events[0]["node"] == "n1"


def test_fidelity_window_from_two_readings():
    core = MapCore(LabInfo("lt", NODES))
    rec = LagRecorder()

    def reading(t, drops=0):
        return {
            "ok": True,
            "t": t,
            "lag": rec.to_wire(),
            "drops": {"modelled": {"queue_drops": 0}, "unmodelled": {"medium_send_drops": drops}},
        }

    for k in range(100):
        rec.record(0.5 + k * 0.001, 0.5 + k * 0.001 - 0.0002)  # 200 us late
    core.fidelity_read(1.0, reading(1.0))
    assert core.fidelity is None  # one reading is no window
    for k in range(100):
        rec.record(1.5 + k * 0.001, 1.5 + k * 0.001 - 0.009)  # 9 ms late
    core.fidelity_read(2.0, reading(2.0, drops=3))
    f = core.fidelity
    assert f["outputs"] == 100 and f["lag_p99_ms"] >= 9 and not f["valid"]
    assert f["unmodelled_drops"] == 3
    assert [row[0] for row in f["seconds"]] == [0, 1]
    core.pages_changed(2.0, 1)
    core.handle_timer(2.0)
    (fid,) = [e for e in drain(core) if isinstance(e, ReadFidelity)]
    assert fid.since == 1  # only the newer rows next time


def test_medium_gone_pushes_once_and_stops_reading():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"))
    open_page(core)
    core.medium_failed(0.5, "medium positions: timed out")
    assert core.gone is None  # a slow medium is not a gone lab
    core.medium_failed(0.6, "the medium's control socket is gone", gone=True)
    msgs = pushes(drain(core))
    assert msgs == [{"type": "gone", "lab": "lt", "reason": "the medium's control socket is gone"}]
    core.medium_failed(0.7, "again", gone=True)
    core.handle_timer(1.0)
    assert drain(core) == [] and core.get_timer() is None
    assert core.snapshot(1.0)["gone"]


def test_bad_input_is_refused_with_the_field():
    core = MapCore(LabInfo("lt", NODES))
    with pytest.raises(ValueError, match="src 'n9'"):
        core.watch(0.0, "n9", "n1")
    with pytest.raises(ValueError, match="same node"):
        core.watch(0.0, "n1", "n1")
    with pytest.raises(ValueError, match="detail: 'x'"):
        core.detail("x")
    with pytest.raises(ValueError, match="frame_s"):
        Rates(frame_s=0)


def test_watched_pair_is_drawn_without_traffic():
    core = MapCore(LabInfo("lt", NODES, stack="dsr"))
    core.node_read(1.0, "n2", daemon_status("n2", paths=[(("n2", "n3", "n4"), 30.0)]), None)
    core.watch(1.0, "n2", "n4")
    (f,) = core.flows(1.0)
    assert f["watched"] and f["path"] == ["n2", "n3", "n4"] and f["seen"] == ["watched"]


def test_the_busier_direction_leads_a_merged_pair():
    from manetkit.lab.map.core import merge_reverse

    def flow(src, dst, path, sent):
        return {"id": f"{src}>{dst}", "src": src, "dst": dst, "path": path, "complete": True,
                "backups": [], "sent_bps": sent, "goodput_bps": None}  # fmt: skip

    acks = flow("n2", "n9", ["n2", "n4", "n9"], 30_000)
    data = flow("n9", "n2", ["n9", "n4", "n2"], 1_200_000)
    (merged,) = merge_reverse([acks, data])
    assert merged["id"] == "n9>n2" and merged["reverse"]["sent_bps"] == 30_000
    other = flow("n2", "n9", ["n2", "n5", "n9"], 30_000)  # another way back: both stay
    assert len(merge_reverse([other, data])) == 2
