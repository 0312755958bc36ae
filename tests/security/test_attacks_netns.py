"""Attacks from a rogue node in radio range (tests/security/rogue.py, scapy, no key).

Real namespaces: three nodes on one bridge (all in range); n1 and n2 run AODV daemons,
n3 is the rogue. Without ``auth:`` the test asserts the damage happens (it documents
the attack); with ``auth: {required: true}`` traffic is unaffected, every forgery is
counted, and a 1000/s RREQ flood costs the victim < 30 % of a core.
Run under the heavy lock (tests/security: docs/security.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from manetkit.daemonstatus import AodvRoute, AodvStatus, DsrStatus
from tests.daemon.vethnet import VethMesh, wait_for

pytestmark = pytest.mark.netns

N1, N2, ROGUE = "10.42.0.1", "10.42.0.2", "10.42.0.3"
KEY = bytes(range(32)).hex()


@pytest.fixture
def mesh(tmp_path):
    with VethMesh(f"mksec{os.getpid() % 1000}", 3, tmp_path) as m:
        yield m


def start(mesh: VethMesh, secured: bool, protocol: str = "aodv") -> None:
    over: dict = {"protocol": protocol}
    if secured:
        key = mesh.workdir / "mesh.key"
        key.write_text(KEY)
        key.chmod(0o600)
        over["auth"] = {"keys": [{"id": 1, "key_file": str(key)}], "required": True}
    for i in (1, 2):
        mesh.start(i, **over)
    wait_for(lambda: mesh.neighbours_up(1, {N2}), 10, "n1 hears n2")
    wait_for(lambda: mesh.neighbours_up(2, {N1}), 10, "n2 hears n1")


def rogue(mesh: VethMesh, dst_mac: str, *args: str) -> dict:
    r = mesh.run(
        3, sys.executable, "-m", "tests.security.rogue", "rad0", dst_mac, *args, check=False
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def ping(mesh: VethMesh, count: int = 3) -> bool:
    r = mesh.run(1, "ping", "-c", str(count), "-i", "0.2", "-W", "1", N2, check=False)
    return r.returncode == 0


def route(mesh: VethMesh, dst: str) -> AodvRoute | None:
    engine = mesh.status(1).engine
    assert isinstance(engine, AodvStatus)
    return next((r for r in engine.routes if r.dst == dst), None)


def dsr_engine(mesh: VethMesh) -> DsrStatus:
    engine = mesh.status(1).engine
    assert isinstance(engine, DsrStatus)
    return engine


def drops(mesh: VethMesh, i: int = 1) -> dict[str, int]:
    return mesh.status(i).counters.drops


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.parametrize("secured", [False, True], ids=["no-auth", "auth"])
def test_forged_rrep_black_hole(mesh, secured):
    start(mesh, secured)
    assert ping(mesh)
    rogue(mesh, mesh.mac(1), "rrep", "--rogue", ROGUE, "--victim", N1, "--dest", N2)
    if not secured:
        # The damage: n1 now routes n2 through the rogue, which drops everything.
        r = route(mesh, N2)
        assert r is not None and r.next_hop == ROGUE, r
        assert not ping(mesh)
    else:
        assert drops(mesh)["auth-unsigned"] >= 3
        r = route(mesh, N2)
        assert r is None or r.next_hop == N2, r
        assert ping(mesh)


@pytest.mark.parametrize("secured", [False, True], ids=["no-auth", "auth"])
def test_forged_dsr_route_error(mesh, secured):
    """A forged Route Error (RFC 4728 8.3.5) addressed to n1 claiming n2 lost its link
    to n1: without auth n1 cuts its route to n2 and holds the link; with auth it is
    dropped before the engine and the route stays."""
    start(mesh, secured, protocol="dsr")
    assert ping(mesh)
    assert dsr_engine(mesh).has_route(N2)
    seen = dsr_engine(mesh).counters.get("errors-seen", 0)
    rogue(mesh, mesh.mac(1), "dsr-rerr", "--src", N2, "--dst", N1, "--unreachable", N1)
    eng = dsr_engine(mesh)
    if not secured:
        # The damage: the route to n2 is gone, the link held (not re-learnt for 2 s).
        assert eng.counters["errors-seen"] - seen >= 3, eng.counters
        assert not eng.has_route(N2), eng.paths
    else:
        assert drops(mesh)["auth-unsigned"] >= 3
        assert eng.counters.get("errors-seen", 0) == seen
        assert eng.has_route(N2), eng.paths
        assert ping(mesh)


def test_replayed_signed_frames_are_counted_and_ignored(mesh):
    """Captured signed frames sent again: from the rogue's own MAC they no longer verify
    (the signature binds the transmitter's MAC), from n2's MAC (spoofed) they meet n2's
    replay window."""
    start(mesh, True)
    captured = rogue(mesh, mesh.mac(2), "capture")["hex"]
    before = drops(mesh)
    rogue(mesh, "ff:ff:ff:ff:ff:ff", "replay", "--hex", captured, "--count", "5")
    rogue(mesh, "ff:ff:ff:ff:ff:ff", "replay", "--hex", captured, "--count", "5",
          "--src-mac", mesh.mac(2))  # fmt: skip

    def counted(reason: str) -> int:
        return drops(mesh).get(reason, 0) - before.get(reason, 0)

    wait_for(lambda: counted("auth-bad-mac") >= 5 and counted("auth-replay") >= 5, 5,
             "replays counted")  # fmt: skip
    assert ping(mesh)


@pytest.mark.parametrize("secured", [False, True], ids=["no-auth", "auth"])
def test_rreq_flood(mesh, secured, record_property):
    start(mesh, secured)
    pid = mesh.procs[1].pid
    before = mesh.status(1).engine.counters
    cpu0, t0 = cpu_seconds(pid), time.monotonic()
    flood = subprocess.Popen(
        ["ip", "netns", "exec", mesh.ns(3), sys.executable, "-m", "tests.security.rogue",
         "rad0", "ff:ff:ff:ff:ff:ff", "rreq-flood", "--orig", "10.42.0.77",
         "--rate", "1000", "--seconds", "3"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        ok = ping(mesh, count=10)
        out, _ = flood.communicate(timeout=20)
    finally:
        if flood.poll() is None:
            flood.kill()
    cpu = (cpu_seconds(pid) - cpu0) / (time.monotonic() - t0)
    sent = json.loads(out.strip().splitlines()[-1])
    assert sent["rate"] >= 800, sent  # the rogue really flooded at ~1000/s
    after = mesh.status(1).engine.counters
    record_property("victim_cpu", round(cpu, 3))
    record_property("flood", sent)
    print(
        f"secured={secured} flood={sent} victim cpu={cpu:.1%} engine before={before} after={after}"
    )
    if secured:
        assert drops(mesh)["auth-unsigned"] >= sent["sent"] * 0.9
        assert cpu < 0.30, f"victim daemon used {cpu:.0%} of a core under the flood"
        assert ok
    else:
        # The damage: the forged requests reach the engine (it processes them).
        grown = sum(after.values()) - sum(before.values())
        assert grown >= sent["sent"] * 0.5, (before, after)


def test_forged_source_flood_does_not_grow_the_victim(mesh, record_property):
    """3,000 RREQs at 1,000/s, each from a made-up originator and MAC (no auth): the
    victim's route table and neighbour tables stay at their bounds (docs/security.md
    "Bounded state"), its memory does not follow the flood, and it still routes."""
    start(mesh, False)
    pid = mesh.procs[1].pid
    rss0 = rss_kib(pid)
    sent = rogue(
        mesh, "ff:ff:ff:ff:ff:ff", "rreq-flood", "--orig", "10.42.0.77", "--spoof",
        "--rate", "1000", "--seconds", "3",
    )  # fmt: skip
    assert sent["sent"] >= 2500, sent
    engine = mesh.status(1).engine
    assert isinstance(engine, AodvStatus)
    bounds = {name: b.model_dump() for name, b in engine.bounds.items()}
    grown = rss_kib(pid) - rss0
    record_property("bounds", bounds)
    record_property("rss_growth_kib", grown)
    print(f"forged-source flood {sent}: bounds {bounds}, RSS +{grown} KiB")
    for table in ("route_table", "neighbours", "rreq_seen"):
        b = bounds[table]
        assert b["size"] <= b["limit"], (table, b)
    # Count against the requests the engine saw, not those the rogue sent: a few of a
    # 1,000/s burst can drop on the way (CI saw 2,892 of 2,999 arrive).
    seen = bounds["rreq_seen"]["size"] + bounds["rreq_seen"]["evicted"]
    assert seen >= sent["sent"] * 0.5, (seen, sent)
    assert bounds["route_table"]["evicted"] >= seen - bounds["route_table"]["limit"]
    assert bounds["neighbours"]["evicted"] > 0
    assert grown < 16 * 1024, f"victim RSS grew {grown} KiB"
    assert ping(mesh)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")
