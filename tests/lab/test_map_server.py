"""What ``manetkit lab map``'s server pushes to a page, against a fake medium and fake
daemons on real unix sockets (``manetkit.jsonlines.LineServer``): no lab, no browser.
Also the CLI's refusals that need no lab."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from manetkit.jsonlines import LineServer, status_handler
from manetkit.lab.map.core import LabInfo, MapCore, Rates
from manetkit.lab.map.server import MapServer
from manetkit.lab.map.sources import LabSource
from manetkit.lab.medium.lag import LagRecorder
from tests.helpers.lab import manetkit
from tests.helpers.statuses import neighbour, status_wire

N = 50
NODES = tuple(f"n{i}" for i in range(1, N + 1))


class FakeMedium:
    """Answers positions, links and fidelity like the medium's control socket; counts."""

    def __init__(self, path: Path) -> None:
        self.server = LineServer(path, self.handle, name="fake medium")
        self.calls: dict[str, int] = {}
        self.t0 = time.monotonic()
        self.lag = LagRecorder()

    def handle(self, req: dict) -> dict:
        cmd = req["cmd"]
        self.calls[cmd] = self.calls.get(cmd, 0) + 1
        t = time.monotonic() - self.t0
        if cmd == "positions":
            return {
                "ok": True,
                "t": t,
                "positions": {n: [20.0 * i + t, 10.0 * (i % 7)] for i, n in enumerate(NODES)},
            }
        if cmd == "links":
            links = [[f"n{i}", f"n{i + 1}", -60.0] for i in range(1, N)]
            return {
                "ok": True,
                "t": t,
                "fields": ["a", "b", "rssi_dbm"],
                "links": links,
                "ranges": {"rx_m": 250.0},
            }
        if cmd == "fidelity":
            self.lag.record(t, t - 0.0001)
            return {
                "ok": True,
                "t": t,
                "lag": self.lag.to_wire(since=req.get("since")),
                "drops": {"modelled": {}, "unmodelled": {}},
            }
        raise ValueError(f"unknown cmd {cmd!r}")


def fake_status(node: str) -> dict:
    other = "10.42.0.2" if node == "n1" else "10.42.0.1"
    path = ["10.42.0.1", "10.42.0.2", "10.42.0.3"]
    return status_wire(
        "dsr",
        f"10.42.0.{node[1:]}",
        neighbours=[neighbour(other)],
        engine={"paths": [{"dst": "10.42.0.3", "next_hop": "10.42.0.2", "hops": 2,
                           "path": path, "age_s": 1.0, "idle_s": 0.5}]},
    )  # fmt: skip


async def _scenario(tmp: Path) -> dict:
    medium = FakeMedium(tmp / "medium.sock")
    await medium.server.start()
    daemons = {}
    for n in ("n1", "n2"):  # the other 48 daemons do not answer
        daemons[n] = LineServer(
            tmp / f"{n}.sock",
            status_handler(lambda n=n: fake_status(n)),
            subscribe=True,
            name=f"fake daemon {n}",
        )
        await daemons[n].start()
    source = LabSource(
        info=LabInfo("fake", NODES, stack="dsr"),
        medium_socket=tmp / "medium.sock",
        daemon_sockets={n: tmp / f"{n}.sock" for n in NODES},
        proxy_sockets={},
    )
    gone: list[str] = []
    server = MapServer(source, MapCore(source.info, Rates(frame_s=0.1)), on_gone=gone.append)
    stop = asyncio.Event()
    client = TestClient(TestServer(server.app()))
    await client.start_server()
    drive = asyncio.create_task(server.drive(stop))
    out: dict = {"medium": medium, "gone": gone}
    try:
        page = await client.get("/")
        out["page"] = await page.text()
        ws = await client.ws_connect("/ws")
        first = json.loads((await ws.receive()).data)
        out["first"] = first
        frames, events, t0 = [], [], time.monotonic()
        published = False
        while time.monotonic() - t0 < 2.5:
            msg = json.loads((await asyncio.wait_for(ws.receive(), 2)).data)
            if msg["type"] == "frame":
                frames.append(msg)
                events += msg.get("events", [])
            if not published and time.monotonic() - t0 > 1.2:
                daemons["n1"].publish(
                    {"event": "route-down", "time": 1.0, "dst": "10.42.0.3", "reason": "tx-failed"}
                )
                published = True
        out["frames"], out["events"], out["seconds"] = frames, events, time.monotonic() - t0
        await ws.send_str(json.dumps({"cmd": "detail", "node": "n1"}))
        await ws.send_str(json.dumps({"cmd": "detail", "node": "n99"}))
        replies = []
        while len(replies) < 2:
            msg = json.loads((await asyncio.wait_for(ws.receive(), 2)).data)
            if msg["type"] in ("detail", "error"):
                replies.append(msg)
        out["replies"] = replies
        # The lab goes down: the medium's socket disappears.
        await medium.server.close()
        while True:
            msg = json.loads((await asyncio.wait_for(ws.receive(), 5)).data)
            if msg["type"] == "gone":
                out["gone_msg"] = msg
                break
        await ws.close()
    finally:
        stop.set()
        await drive
        await client.close()
        for d in daemons.values():
            await d.close()
    return out


def test_pushes_frames_for_50_nodes_with_events_detail_and_the_lab_gone(tmp_path):
    out = asyncio.run(_scenario(tmp_path))
    assert "<svg" in out["page"] and "/static/map.js" in out["page"]
    first = out["first"]
    assert first["type"] == "frame" and first["full"] and len(first["lab"]["nodes"]) == N
    frames = out["frames"]
    rate = len(frames) / out["seconds"]
    assert rate >= 5, f"{rate:.1f} frames/s"
    assert all(len(f["positions"]) == N for f in frames)
    xs = [f["positions"]["n1"][0] for f in frames]
    assert xs == sorted(xs) and xs[-1] > xs[0]  # the nodes move from frame to frame
    # the medium was read sparingly: one positions per frame, links a few times a second
    calls = out["medium"].calls
    assert calls["positions"] <= len(frames) + 3
    assert calls["links"] <= 2.5 * out["seconds"] + 2
    last_links = next(f["links"] for f in reversed(frames) if "links" in f)
    assert len(last_links) == N - 1
    summary = next(f["nodes"] for f in reversed(frames) if "nodes" in f)
    assert summary["n1"]["ok"] is True and summary["n10"]["ok"] is False
    assert "no daemon answers" in summary["n10"]["error"]
    routing = next(f["routing"] for f in reversed(frames) if "routing" in f)
    assert {"a": "n1", "b": "n2", "both": True, "medium": True} in routing
    assert [e["text"] for e in out["events"]] == ["n1: route to n3 down (tx-failed)"]
    detail, error = out["replies"]
    assert detail["node"] == "n1" and detail["daemon"]["engine"]["protocol"] == "dsr"
    assert error == {"type": "error", "error": "detail: 'n99' is not a node of lab fake"}
    assert "gone" in out["gone_msg"]["reason"] and out["gone"]


def test_unknown_lab_name_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path))
    r = manetkit("lab", "map", "--name", "nosuchlab", check=False)
    assert r.returncode == 2
    assert "no lab named 'nosuchlab' is up (labs up: " in r.stderr
    assert "Traceback" not in r.stderr
    r = manetkit("lab", "map", "--name", "Bad-Name", check=False)
    assert r.returncode == 2 and "--name: lab name 'Bad-Name'" in r.stderr
    r = manetkit("lab", "map", "--port", "0", check=False)
    assert r.returncode == 2 and "--port 0" in r.stderr


def test_a_compose_lab_is_read_through_its_containers_roots(monkeypatch):
    from manetkit.lab.map import sources

    def container(service, pid, env):
        return {
            "Config": {"Labels": {sources.SERVICE_LABEL: service}},
            "State": {"Pid": pid},
            "_env": {"MK_LAB": "chain3", **env},
        }

    daemon = json.dumps({"address": "10.42.0.1", "event_socket": "/run/mk/n1/events.sock"})
    medium_env = {"MK_SCENARIO": "name: chain3\nnodes: 2\nstack: dsr\n"}
    src = sources.docker_source(
        "chain3",
        [
            container("medium", 100, medium_env),
            container("n1", 101, {"MK_NODE": "n1", "MK_DAEMON": daemon, "MK_PROXY": ""}),
            container("n2", 102, {"MK_NODE": "n2"}),
        ],
    )
    assert src.info.kind == "docker" and src.info.stack == "dsr" and src.info.nodes == ("n1", "n2")
    assert str(src.medium_socket) == "/proc/100/root/run/manetkit/labs/chain3/medium-ctl.sock"
    assert str(src.daemon_sockets["n1"]) == "/proc/101/root/run/mk/n1/events.sock"
    assert (
        str(src.daemon_sockets["n2"])
        == "/proc/102/root/run/manetkit/labs/chain3/nodes/n2/events.sock"
    )
    assert src.netns == {"n1": "/proc/101/ns/net", "n2": "/proc/102/ns/net"}
