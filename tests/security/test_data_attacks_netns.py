"""Attacks with forged data from a rogue node in radio range (tests/security/rogue.py,
scapy, no key): real daemons in namespaces on one bridge; run under the heavy lock.

- A forged DSR Source Route (docs/security.md "Unsigned data"): in a chain n1 - n2 -
  n3 (n1 and n3 out of range: isolated bridge ports), the rogue n4, in range of all,
  sends n1 40 data packets 'from n3' over no hop. Without auth n1 maps n3's address to
  the rogue's MAC and caches a one-hop route to it: a black hole made without the key.
  With ``auth: {required: true}`` unsigned data teaches nothing: the route stays via
  n2 and ping n1 -> n3 passes 10/10.
- Data carrying the victim's own source address (AODV, auth on): 3,000 packets at
  500/s, each to a new destination, used to start as many discoveries; now they are
  counted and dropped, the victim's tables and memory stay flat, ping passes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.daemon.vethnet import VethMesh, sh, wait_for
from tests.security.test_attacks_netns import KEY, rss_kib

pytestmark = pytest.mark.netns

N1, N2, N3 = "10.42.0.1", "10.42.0.2", "10.42.0.3"


@pytest.fixture
def chain(tmp_path):
    """n1 - n2 - n3 and the rogue n4 in range of all three."""
    with VethMesh(f"mkdat{os.getpid() % 1000}", 4, tmp_path) as m:
        for port in ("p1", "p3"):  # isolated ports hear only the others
            sh("ip", "-n", m.hub, "link", "set", port, "type", "bridge_slave", "isolated", "on")
        yield m


def start(mesh: VethMesh, nodes: tuple[int, ...], protocol: str, secured: bool) -> None:
    over: dict = {"protocol": protocol}
    if secured:
        key = mesh.workdir / "mesh.key"
        key.write_text(KEY)
        key.chmod(0o600)
        over["auth"] = {"keys": [{"id": 1, "key_file": str(key)}]}  # required: the default
    for i in nodes:
        mesh.start(i, **over)


def rogue(mesh: VethMesh, node: int, dst_mac: str, *args: str) -> dict:
    """Run tests/security/rogue.py in namespace ``node``; its JSON line."""
    r = mesh.run(
        node, sys.executable, "-m", "tests.security.rogue", "rad0", dst_mac, *args, check=False
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def ping(mesh: VethMesh, dst: str, count: int) -> int:
    """Replies n1 got from ``dst`` out of ``count``."""
    r = mesh.run(1, "ping", "-c", str(count), "-i", "0.2", "-W", "1", dst, check=False)
    for line in r.stdout.splitlines():
        if "received" in line:
            return int(line.split(",")[1].split()[0])
    return 0


@pytest.mark.parametrize("secured", [False, True], ids=["no-auth", "auth"])
def test_forged_source_route_black_hole(chain, secured, record_property):
    mesh = chain
    start(mesh, (1, 2, 3), "dsr", secured)
    wait_for(lambda: mesh.neighbours_up(2, {N1, N3}), 15, "n2 hears n1 and n3")
    wait_for(lambda: ping(mesh, N3, 1) == 1, 20, "n1 reaches n3 through n2")
    sent = rogue(mesh, 4, mesh.mac(1), "dsr-data", "--src", N3, "--dst", N1, "--count", "40")
    st = mesh.status(1)
    neighbours = {n.address: n.mac for n in st.neighbours}
    paths = [p.path for p in st.engine.paths if p.dst == N3]  # type: ignore[union-attr]
    got = ping(mesh, N3, 10)
    record_property("attack", {"sent": sent, "neighbours": neighbours, "paths": paths,
                               "ping": got, "counters": st.engine.counters})  # fmt: skip
    print(f"secured={secured}: n1 neighbours {neighbours}, paths to n3 {paths}, ping {got}/10")
    if not secured:
        # The damage: n3 'is' the rogue, one hop away; n1's packets to n3 vanish.
        assert neighbours.get(N3) == mesh.mac(4), neighbours
        assert [N1, N3] in paths and got == 0
    else:
        assert N3 not in neighbours, neighbours
        assert paths and all(p == [N1, N2, N3] for p in paths), paths
        assert st.engine.counters.get("unsigned-not-learned", 0) >= 1
        assert got == 10


@pytest.fixture
def pair(tmp_path):
    with VethMesh(f"mkown{os.getpid() % 1000}", 3, tmp_path) as m:
        yield m


def test_own_source_data_flood_starts_no_discovery(pair, record_property):
    mesh = pair
    start(mesh, (1, 2), "aodv", True)
    wait_for(lambda: mesh.neighbours_up(1, {N2}), 15, "n1 hears n2")
    pid = mesh.procs[1].pid
    rss0 = rss_kib(pid)
    flood = subprocess.Popen(
        ["ip", "netns", "exec", mesh.ns(3), sys.executable, "-m", "tests.security.rogue",
         "rad0", mesh.mac(1), "data-flood", "--src", N1, "--rate", "500", "--seconds", "6"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        got = ping(mesh, N2, 10)
        out, _ = flood.communicate(timeout=30)
    finally:
        if flood.poll() is None:
            flood.kill()
            flood.wait()
    sent = json.loads(out.strip().splitlines()[-1])
    st = mesh.status(1)
    eng = st.engine
    grown = rss_kib(pid) - rss0
    record_property("flood", sent)
    record_property("victim", {"own_source": eng.counters.get("own-source"),
                               "discoveries": len(eng.discoveries),  # type: ignore[union-attr] "rss_growth_kib": grown,
                               "send_buffer": st.send_buffer.packets, "ping": got})  # fmt: skip
    print(f"own-source flood {sent}: counters {eng.counters}, discoveries "
          f"{len(eng.discoveries)}, RSS +{grown} KiB, ping {got}/10")  # fmt: skip
    assert sent["sent"] >= 2500, sent
    assert eng.counters.get("own-source", 0) >= sent["sent"] * 0.9
    assert eng.discoveries == []  # type: ignore[union-attr]
    assert st.send_buffer.packets == 0
    assert grown < 8 * 1024, f"victim RSS grew {grown} KiB"
    assert got == 10
