"""What the live map shows, as state fed by what the map's server read (sans-I/O).

:class:`MapCore` follows the project's core contract: inputs are methods named for what
was read, stamped with ``now`` (the shell's monotonic clock, seconds); it reads no
clock and does no I/O. Its outputs, drained with :meth:`MapCore.next_event`, are
commands to the shell (:class:`ReadPositions`, :class:`ReadLinks`, :class:`ReadNode`,
:class:`ReadRoutes`, :class:`ReadFidelity`: read this now) and :class:`Push` messages
for every open page. One timer (:meth:`get_timer` / :meth:`handle_timer`) paces the
reads, so the core decides how hard the lab is polled:

- the medium's ``positions`` once per frame (``Rates.frame_s``), and a frame is pushed
  when they arrive; its ``links`` less often; ``fidelity`` every ``fidelity_s``;
- each node's daemon and proxy status at ``status_s``, the nodes spread over that period
  so the reads never come in a burst; kernel routes (peer stacks) at ``routes_s``;
- a read of one kind is never issued while the previous one is unanswered (a slow medium
  slows the map, not the other way round), and nothing is read while no page is open.

A frame carries only the sections that changed since the last one (a page merges them);
:meth:`MapCore.snapshot` is the whole state for a page that just connected.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

from manetkit.daemonstatus import AodvStatus, DaemonStatus, SmrStatus, SourceRouteStatus
from manetkit.lab.fidelity import Reading, window

# A flow whose source sent within this long (plus one status period) is shown.
ACTIVE_S = 2.0
EVENTS_KEPT = 200
FIDELITY_SECONDS_KEPT = 60
# The events a page shows on its timeline (neighbour-up/down are the links themselves).
TIMELINE_EVENTS = frozenset(
    {
        "route-up",
        "route-down",
        "predicted-failure",
        "path-switch",
        "erdn",
        "ersn",
        "elfn-freeze",
        "elfn-resume",
    }
)
MANETKIT_STACKS = ("aodv", "dsr", "smr")
PEER_STACKS = ("babeld", "batmand")
# The carrier-sense pairs (many, slow to change) come with every 4th links read.
CS_EVERY = 4


@dataclass(frozen=True, slots=True)
class Rates:
    """Seconds between reads of each kind (docs/lab.md, "The live map")."""

    frame_s: float = 0.1
    links_s: float = 0.5
    status_s: float = 1.0
    routes_s: float = 1.0
    fidelity_s: float = 2.0

    @classmethod
    def for_lab(cls, nodes: int, fps: float = 10.0) -> Rates:
        """``fps`` frames a second; each node's status every second up to 30 nodes, less
        often above (every daemon answers a status read with its whole route table)."""
        per_node = max(1.0, nodes / 30)
        return cls(frame_s=1.0 / fps, status_s=per_node, routes_s=per_node)

    def __post_init__(self) -> None:
        for name in ("frame_s", "links_s", "status_s", "routes_s", "fidelity_s"):
            v = getattr(self, name)
            if not (isinstance(v, int | float) and math.isfinite(v) and v > 0):
                raise ValueError(f"{name}: must be a positive number of seconds, not {v!r}")


@dataclass(frozen=True, slots=True)
class LabInfo:
    """The lab as the map knows it before reading anything."""

    name: str
    nodes: tuple[str, ...]
    stack: str = "none"
    proxy: str = "none"
    kind: str = "netns"  # or "docker"
    area: tuple[float, float] | None = None


# --- outputs ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReadPositions:
    pass


@dataclass(frozen=True, slots=True)
class ReadLinks:
    """``cs``: also the carrier-sense pairs (every ``CS_EVERY`` reads)."""

    cs: bool = False


@dataclass(frozen=True, slots=True)
class ReadFidelity:
    since: int | None


@dataclass(frozen=True, slots=True)
class ReadNode:
    """The node's daemon status and its proxy's status."""

    node: str


@dataclass(frozen=True, slots=True)
class ReadRoutes:
    """The node's kernel routes (and babeld's neighbours): the peer stacks' view."""

    node: str


@dataclass(frozen=True, slots=True)
class Push:
    """A message for every open page (JSON-ready)."""

    message: dict[str, Any]


MapEvent = ReadPositions | ReadLinks | ReadFidelity | ReadNode | ReadRoutes | Push


# --- helpers ---------------------------------------------------------------------------


def node_of_address(address: str | None, index: dict[str, str]) -> str | None:
    """``10.42.0.3`` (or ``10.42.0.3:80``, ``10.42.0.3/32``) -> ``n3`` in this lab."""
    if not address:
        return None
    return index.get(str(address).split("/")[0].split(":")[0])


def address_index(nodes: Iterable[str]) -> dict[str, str]:
    """Mesh address -> node (10.42.0.I, as ``manetkit.lab.addressing.node_address``)."""
    out = {}
    for n in nodes:
        i = int(n[1:])
        addr = (
            IPv4Address(f"10.42.0.{i}") if i <= 254 else IPv4Address(f"10.42.{i // 256}.{i % 256}")
        )
        out[str(addr)] = n
    return out


def kernel_next_hops(routes: list[dict[str, Any]], index: dict[str, str]) -> dict[str, str]:
    """dst node -> next-hop node from kernel host routes (``10.42.0.5 via 10.42.0.2``; a
    route without a gateway reaches its destination directly). Prefix routes (the /16
    on-link route, ``unreachable`` entries) say nothing about one node and are skipped."""
    out: dict[str, str] = {}
    for r in routes:
        if r.get("type", "unicast") != "unicast" or r.get("protocol") == "kernel":
            continue
        dst = str(r.get("dst") or "")
        if "/" in dst and not dst.endswith("/32"):
            continue
        d = node_of_address(dst, index)
        if not d:
            continue
        nh = node_of_address(r.get("via"), index) if r.get("via") else d
        if nh:
            out[d] = nh
    return out


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if (int(a[1:]), a) <= (int(b[1:]), b) else (b, a)


@dataclass(slots=True)
class _NodeState:
    daemon: DaemonStatus | None = None  # the daemon's last status
    daemon_error: str | None = None
    proxy: dict[str, Any] | None = None
    routes: list[dict[str, Any]] | None = None  # kernel routes (peer stacks)
    peer_neighbours: list[dict[str, Any]] | None = None  # babeld's
    routes_error: str | None = None
    # the daemon's data-plane counts (status "flows"): address -> (now, packets, bytes)
    originated: dict[str, tuple[float, int, int]] = field(default_factory=dict)
    delivered: dict[str, tuple[float, int, int]] = field(default_factory=dict)
    sent_at: dict[str, float] = field(default_factory=dict)  # dst -> when it last grew
    sent_bps: dict[str, float] = field(default_factory=dict)
    delivered_bps: dict[str, float] = field(default_factory=dict)  # per source
    sessions: dict[str, dict[str, Any]] = field(default_factory=dict)  # proxy, by sid


class MapCore:
    """The live map's state (see the module docstring)."""

    def __init__(self, lab: LabInfo, rates: Rates | None = None) -> None:
        self.lab = lab
        self.rates = rates or Rates()
        self.nodes = tuple(lab.nodes)
        self._index = address_index(self.nodes)
        self._out: deque[MapEvent] = deque()
        self._pages = 0
        self._due: dict[Any, float] = {}
        self._pending: set[Any] = set()
        self._node: dict[str, _NodeState] = {n: _NodeState() for n in self.nodes}
        self.t: float | None = None  # the medium's clock at the last positions
        self.positions: dict[str, list[float]] = {}
        self.links: list[dict[str, Any]] = []
        self.links_known = False  # a medium without ``links`` (an older image) never says
        self.cs: list[list[str]] = []
        self.ranges: dict[str, float] = {}
        self.fidelity: dict[str, Any] | None = None
        self._fid_last: Reading | None = None
        self._fid_rows: deque[list] = deque(maxlen=FIDELITY_SECONDS_KEPT)
        self.events: deque[dict[str, Any]] = deque(maxlen=EVENTS_KEPT)
        self._new_events: list[dict[str, Any]] = []
        self.watched: set[tuple[str, str]] = set()
        self._goodput: dict[str, tuple[float, int]] = {}  # session -> (now, bytes to apps)
        self._rates_bps: dict[str, float] = {}  # session -> goodput
        self.gone: str | None = None
        self._dirty: set[str] = set()
        self.frames = 0
        self._links_reads = 0

    # --- inputs: pages -------------------------------------------------------------

    def pages_changed(self, now: float, count: int) -> None:
        """``count`` pages are open now; with none the lab is not read at all."""
        was = self._pages
        self._pages = max(0, count)
        if was == 0 and self._pages > 0:
            self._schedule_all(now)
        elif self._pages == 0:
            self._due.clear()

    def watch(self, now: float, src: str, dst: str, on: bool = True) -> None:
        """Show the path ``src`` -> ``dst`` whether or not traffic was seen on it."""
        for n, what in ((src, "src"), (dst, "dst")):
            if n not in self._node:
                raise ValueError(f"watch: {what} {n!r} is not a node of lab {self.lab.name}")
        if src == dst:
            raise ValueError("watch: src and dst are the same node")
        if on:
            self.watched.add((src, dst))
        else:
            self.watched.discard((src, dst))
        self._dirty.add("flows")

    # --- inputs: what was read -------------------------------------------------------

    def positions_read(self, now: float, reply: dict[str, Any]) -> None:
        self._pending.discard("positions")
        pos = reply.get("positions") or {}
        self.positions = {n: [float(v[0]), float(v[1])] for n, v in pos.items() if n in self._node}
        self.t = reply.get("t")
        if self._pages and self.gone is None:
            self._push_frame(now)

    def links_read(self, now: float, reply: dict[str, Any]) -> None:
        """The medium's ``links``: rows under ``fields`` (docs/medium.md); ``cs`` when
        it was asked for."""
        self._pending.discard("links")
        self.links_known = True
        fields = reply.get("fields") or ["a", "b", "rssi_dbm"]
        links = []
        for row in reply.get("links", []):
            lk = dict(zip(fields, row, strict=False)) if isinstance(row, list) else dict(row)
            if lk.get("a") in self._node and lk.get("b") in self._node:
                links.append(lk)
        if links != self.links:
            self.links = links
            self._dirty.update(("links", "routing"))
        if "cs" in reply and reply["cs"] != self.cs:
            self.cs = [list(p) for p in reply["cs"]]
            self._dirty.add("links")
        if reply.get("ranges") and reply["ranges"] != self.ranges:
            self.ranges = dict(reply["ranges"])
            self._dirty.add("lab")

    def fidelity_read(self, now: float, reply: dict[str, Any]) -> None:
        self._pending.discard("fidelity")
        try:
            reading = Reading.from_medium(reply)
        except (KeyError, TypeError, ValueError):
            return
        for row in reading.seconds:
            if self._fid_rows and row[0] <= self._fid_rows[-1][0]:
                if row[0] == self._fid_rows[-1][0]:
                    self._fid_rows[-1] = row  # the second in progress, now further on
                continue
            self._fid_rows.append(row)
        if self._fid_last is not None and reading.t > self._fid_last.t:
            w = window(self._fid_last, reading)
            self.fidelity = {
                "window_s": round(w.end_t - w.start_t, 1),
                "outputs": w.outputs,
                "lag_p50_ms": w.lag_p50_ms,
                "lag_p99_ms": w.lag_p99_ms,
                "lag_max_ms": w.lag_max_ms,
                "modelled_drops": sum(w.modelled_drops.values()),
                "unmodelled_drops": sum(w.unmodelled_drops.values()),
                "valid": w.valid,
                "reasons": w.reasons,
                "seconds": [[r[0], r[3], r[4]] for r in self._fid_rows],
            }
            self._dirty.add("fidelity")
        self._fid_last = reading

    def medium_failed(self, now: float, error: str, gone: bool = False) -> None:
        """A medium read failed. ``gone``: its socket is missing or refuses connections,
        so the lab is down; otherwise (a timeout, a medium too busy) the next read tries
        again."""
        self._pending -= {"positions", "links", "fidelity"}
        if gone:
            self.lab_gone(now, error)

    def lab_gone(self, now: float, reason: str) -> None:
        if self.gone is not None:
            return
        self.gone = reason
        self._due.clear()
        self._out.append(Push({"type": "gone", "lab": self.lab.name, "reason": reason}))

    def node_read(
        self,
        now: float,
        node: str,
        daemon: DaemonStatus | None,
        proxy: dict[str, Any] | None,
        daemon_error: str | None = None,
    ) -> None:
        """The node's daemon status (None: not answering, ``daemon_error`` says why) and
        its proxy's status (None: no proxy answers)."""
        self._pending.discard(("node", node))
        st = self._node.get(node)
        if st is None:
            return
        if daemon is not None:
            self._dataplane_flows(now, st, daemon)
        st.daemon, st.daemon_error = daemon, daemon_error
        self._proxy_sessions(now, node, st, proxy)
        st.proxy = proxy
        self._dirty.update(("routing", "flows", "nodes"))

    def routes_read(
        self,
        now: float,
        node: str,
        routes: list[dict[str, Any]] | None,
        neighbours: list[dict[str, Any]] | None = None,
        error: str | None = None,
    ) -> None:
        """The node's kernel routes (``[{dst, via, dev, table, protocol, type}]`` as
        ``manetkit.lab.peers.kernel_routes``) and babeld's neighbours, if any."""
        self._pending.discard(("routes", node))
        st = self._node.get(node)
        if st is None:
            return
        st.routes, st.peer_neighbours, st.routes_error = routes, neighbours, error
        self._dirty.update(("routing", "flows", "nodes"))

    def node_failed(self, now: float, key: str, node: str, error: str) -> None:
        """A read of ``key`` (``node`` or ``routes``) for ``node`` failed."""
        self._pending.discard((key, node))
        st = self._node.get(node)
        if st is None:
            return
        if key == "node":
            st.daemon, st.daemon_error = None, error
        else:
            st.routes, st.routes_error = None, error
        self._dirty.update(("routing", "flows", "nodes"))

    def event_received(self, now: float, node: str, obj: dict[str, Any]) -> None:
        """One line of ``node``'s daemon event socket (``manetkit.events`` wire form)."""
        name = obj.get("event")
        if not isinstance(name, str) or name not in TIMELINE_EVENTS:
            return
        self._add_event(now, node, name, obj)

    # --- timer -----------------------------------------------------------------------

    def get_timer(self) -> float | None:
        return min(self._due.values()) if self._due else None

    def handle_timer(self, now: float) -> None:
        if self.gone is not None or not self._pages:
            return
        r = self.rates
        for key, at in sorted(self._due.items(), key=lambda kv: kv[1]):
            if at > now:
                continue
            if key == "positions":
                self._read("positions", ReadPositions(), now, r.frame_s)
            elif key == "links":
                self._links_reads += 1
                cs = self._links_reads % CS_EVERY == 1
                self._read("links", ReadLinks(cs), now, r.links_s)
            elif key == "fidelity":
                since = int(self._fid_rows[-1][0]) if self._fid_rows else None
                self._read("fidelity", ReadFidelity(since), now, r.fidelity_s)
            elif key[0] == "node":
                self._read(key, ReadNode(key[1]), now, r.status_s)
            elif key[0] == "routes":
                self._read(key, ReadRoutes(key[1]), now, r.routes_s)

    def next_event(self) -> MapEvent | None:
        return self._out.popleft() if self._out else None

    def _read(self, key: Any, out: MapEvent, now: float, period: float) -> None:
        # Next read one period after this one was due (not after now): the pace holds
        # even when the loop is late; a read still unanswered is not repeated.
        at = self._due[key]
        self._due[key] = at + period if at + period > now else now + period
        if key in self._pending:
            return
        self._pending.add(key)
        self._out.append(out)

    def _schedule_all(self, now: float) -> None:
        r = self.rates
        self._due = {"positions": now, "links": now, "fidelity": now}
        n = len(self.nodes)
        for i, node in enumerate(self.nodes):
            if self.lab.stack in MANETKIT_STACKS or self.lab.proxy != "none":
                self._due[("node", node)] = now + r.status_s * i / max(n, 1)
            if self.lab.stack in PEER_STACKS:
                self._due[("routes", node)] = now + r.routes_s * i / max(n, 1)
        self._dirty.update(("lab", "nodes", "links", "routing", "flows", "fidelity"))

    # --- derived state -----------------------------------------------------------------

    @staticmethod
    def _dataplane_flows(now: float, st: _NodeState, daemon: DaemonStatus) -> None:
        """Send and delivery rates per address from two readings of the daemon's
        ``flows`` counts (what its apps sent through ``mesh0``, what it delivered)."""
        flows = daemon.flows
        for kind, rates in (("originated", st.sent_bps), ("delivered", st.delivered_bps)):
            prev: dict[str, tuple[float, int, int]] = getattr(st, kind)
            cur: dict[str, tuple[float, int, int]] = {}
            for addr, (packets, nbytes) in getattr(flows, kind).items():
                cur[addr] = (now, packets, nbytes)
                old = prev.get(addr)
                if old is None or now <= old[0]:
                    continue
                rates[addr] = max(0, nbytes - old[2]) * 8 / (now - old[0])
                if kind == "originated" and packets > old[1]:
                    st.sent_at[addr] = now
            for addr in set(rates) - set(cur):
                del rates[addr]
            setattr(st, kind, cur)

    def _proxy_sessions(
        self, now: float, node: str, st: _NodeState, proxy: dict[str, Any] | None
    ) -> None:
        """Goodput per session (bytes the proxies handed to the apps, both ends) and the
        ELFN freeze/resume transitions between two reads (Holland & Vaidya section 4)."""
        sessions = {s["session"]: s for s in (proxy or {}).get("sessions", []) if "session" in s}
        for sid, s in sessions.items():
            old = st.sessions.get(sid)
            state = s.get("state")
            if old is not None and old.get("state") != state:
                if state == "frozen":
                    self._add_event(now, node, "elfn-freeze", s)
                elif state == "flowing" and old.get("state") in ("frozen", "probing", "resuming"):
                    self._add_event(now, node, "elfn-resume", s)
            key = f"{node}/{sid}"
            delivered = int(s.get("bytes_to_app") or 0)
            prev = self._goodput.get(key)
            if prev is not None and now > prev[0]:
                self._rates_bps[key] = max(0, delivered - prev[1]) * 8 / (now - prev[0])
            self._goodput[key] = (now, delivered)
        for sid in set(st.sessions) - set(sessions):
            self._goodput.pop(f"{node}/{sid}", None)
            self._rates_bps.pop(f"{node}/{sid}", None)
        st.sessions = sessions

    def _add_event(self, now: float, node: str, name: str, obj: dict[str, Any]) -> None:
        ev: dict[str, Any] = {
            "kind": name,
            "node": node,
            "at": round(now, 3),
            "text": describe_event(node, name, obj, self._index),
        }
        if isinstance(obj.get("time"), int | float):
            ev["time"] = obj["time"]  # the daemon's unix time
        link = obj.get("broken_link")
        if isinstance(link, list | tuple) and len(link) == 2:
            a, b = (node_of_address(x, self._index) for x in link)
            if a and b:
                ev["link"] = [a, b]
        for k in ("dst", "neighbour", "pivot"):
            n = node_of_address(obj.get(k), self._index)
            if n:
                ev[k] = n
        self.events.append(ev)
        self._new_events.append(ev)

    # --- queries (pure) -------------------------------------------------------------

    def neighbour_view(self) -> dict[str, list[dict[str, Any]]]:
        """Each node's neighbours as its routing stack believes them."""
        out: dict[str, list[dict[str, Any]]] = {}
        for node, st in self._node.items():
            rows: list[dict[str, Any]] = []
            if st.daemon is not None:
                for nb in st.daemon.neighbours:
                    n = node_of_address(nb.address, self._index)
                    if n:
                        rows.append({"node": n, "up": nb.up, "signal_dbm": nb.signal_dbm})
            elif st.peer_neighbours is not None:
                for nb in st.peer_neighbours:
                    if nb.get("node") in self._node:
                        rows.append({"node": nb["node"], "up": True, "cost": nb.get("cost")})
            elif st.routes is not None:  # batmand: the one-hop host routes
                for dst, nh in kernel_next_hops(st.routes, self._index).items():
                    if nh == dst:
                        rows.append({"node": dst, "up": True})
            out[node] = rows
        return out

    def routing_links(self) -> list[dict[str, Any]]:
        """Pairs some routing stack believes are neighbours, with whether the medium
        carries frames between them (``medium``; False = a gray-zone link; None until
        the medium has answered a ``links`` read)."""
        medium = {_pair(lk["a"], lk["b"]) for lk in self.links}
        believed: dict[tuple[str, str], set[str]] = {}
        for node, rows in self.neighbour_view().items():
            for r in rows:
                if r["up"] and r["node"] != node:
                    believed.setdefault(_pair(node, r["node"]), set()).add(node)
        return [
            {
                "a": a,
                "b": b,
                "both": len(by) == 2,
                "medium": (a, b) in medium if self.links_known else None,
            }
            for (a, b), by in sorted(believed.items())
        ]

    def _next_hops(self, node: str) -> dict[str, str]:
        """dst node -> next-hop node from the node's AODV table or kernel routes."""
        st = self._node[node]
        out: dict[str, str] = {}
        if st.daemon is not None:
            eng = st.daemon.engine
            for r in eng.routes if isinstance(eng, AodvStatus) else []:
                if r.state != "valid":
                    continue
                d = node_of_address(r.dst, self._index)
                nh = node_of_address(r.next_hop, self._index)
                if d and nh:
                    out[d] = nh
        elif st.routes is not None:
            out = kernel_next_hops(st.routes, self._index)
        return out

    def path(self, src: str, dst: str) -> dict[str, Any]:
        """The path ``src`` -> ``dst`` as the routing has it now: ``path`` (nodes, may
        stop short: ``complete`` False), ``backups`` (SMR), ``how``."""
        st = self._node[src]
        eng = st.daemon.engine if st.daemon is not None else None
        proto = eng.protocol if eng is not None else None
        if isinstance(eng, SourceRouteStatus):
            return self._source_route(src, dst, eng)
        hops = {n: self._next_hops(n) for n in self.nodes} if proto == "aodv" or st.routes else {}
        path = [src]
        seen = {src}
        cur = src
        while cur != dst:
            nh = hops.get(cur, {}).get(dst)
            if nh is None or nh in seen:
                break
            path.append(nh)
            seen.add(nh)
            cur = nh
        how = "aodv next hops" if proto == "aodv" else "kernel routes"
        return {"path": path, "complete": path[-1] == dst, "backups": [], "how": how}

    def _source_route(self, src: str, dst: str, eng: SourceRouteStatus) -> dict[str, Any]:
        """DSR: the cached source route the source used last (RFC 4728 4.1); SMR: the
        primary and backups of its path set (Lee & Gerla section 3)."""

        def nodes_of(path: list[str]) -> list[str] | None:
            out = [node_of_address(a, self._index) for a in path]
            return None if None in out else out  # type: ignore[return-value]

        multipath = eng.multipath if isinstance(eng, SmrStatus) else []
        rows = [r for r in multipath if node_of_address(r.dst, self._index) == dst]
        if rows:
            prim = [nodes_of(r.path) for r in rows if r.role == "primary"]
            backs = [nodes_of(r.path) for r in rows if r.role != "primary"]
            if prim and prim[0]:
                return {
                    "path": prim[0],
                    "complete": True,
                    "backups": [b for b in backs if b],
                    "how": "smr primary/backup",
                }
        best: tuple[float, list[str]] | None = None
        for e in eng.paths:
            p = nodes_of(e.path)
            if not p or dst not in p:
                continue
            p = p[: p.index(dst) + 1]
            idle = e.idle_s
            if best is None or (idle, len(p)) < (best[0], len(best[1])):
                best = (idle, p)
        if best is None:
            return {"path": [src], "complete": False, "backups": [], "how": "dsr source route"}
        return {"path": best[1], "complete": True, "backups": [], "how": "dsr source route"}

    def flows(self, now: float) -> list[dict[str, Any]]:
        """Active flows: what a node's apps sent to a destination in the last
        ``ACTIVE_S`` (the daemon's data-plane counts, with the rate the destination
        delivered), proxy sessions (with their goodput), and the watched pairs."""
        found: dict[tuple[str, str], dict[str, Any]] = {}

        def add(src: str, dst: str, why: str) -> dict[str, Any]:
            f = found.setdefault((src, dst), {"src": src, "dst": dst, "seen": [], "sessions": 0})
            if why not in f["seen"]:
                f["seen"].append(why)
            return f

        for node, st in self._node.items():
            for addr, at in st.sent_at.items():
                dst = node_of_address(addr, self._index)
                if dst and dst != node and now - at <= ACTIVE_S + self.rates.status_s:
                    f = add(node, dst, "sent")
                    f["sent_bps"] = round(st.sent_bps.get(addr, 0.0))
                    src_addr = next((a for a, n in self._index.items() if n == node), None)
                    rate = self._node[dst].delivered_bps.get(src_addr) if src_addr else None
                    if rate is not None:
                        f["delivered_bps"] = round(rate)
            for sid, s in st.sessions.items():
                if s.get("role") != "initiator" or s.get("state") == "closed":
                    continue
                peer = node_of_address(s.get("peer"), self._index)
                if peer and peer != node:
                    f = add(node, peer, "proxy session")
                    f["sessions"] += 1
                    f.setdefault("goodput_bps", 0.0)
                    f["goodput_bps"] += self._rates_bps.get(f"{node}/{sid}", 0.0)
                    # the other end's deliveries (uploads) belong to the same flow
                    for key, bps in self._rates_bps.items():
                        if key == f"{peer}/{sid}":
                            f["goodput_bps"] += bps
                    if s.get("state") != "flowing":
                        f["state"] = s.get("state")
        for src, dst in self.watched:
            add(src, dst, "watched")
        out = []
        for (src, dst), f in sorted(
            found.items(), key=lambda kv: (int(kv[0][0][1:]), int(kv[0][1][1:]))
        ):
            f.update(self.path(src, dst))
            f["id"] = f"{src}>{dst}"
            f["watched"] = (src, dst) in self.watched
            if "goodput_bps" in f:
                f["goodput_bps"] = round(f["goodput_bps"])
            else:
                f["goodput_bps"] = None
            out.append(f)
        return merge_reverse(out)

    def node_summary(self) -> dict[str, dict[str, Any]]:
        out = {}
        for node, st in self._node.items():
            eng = st.daemon.engine if st.daemon is not None else None
            if self.lab.stack in MANETKIT_STACKS:
                ok, err = st.daemon is not None, st.daemon_error
            elif self.lab.stack in PEER_STACKS:
                ok, err = st.routes is not None, st.routes_error
            else:
                ok, err = None, None
            out[node] = {
                "ok": ok,
                "error": err,
                "protocol": eng.protocol
                if eng is not None
                else (self.lab.stack if self.lab.stack != "none" else None),
                "address": next((a for a, n in self._index.items() if n == node), None),
                "proxy": None if st.proxy is None else len(st.proxy.get("sessions", [])),
            }
        return out

    def detail(self, node: str) -> dict[str, Any]:
        """Everything read about ``node`` (the page's status table)."""
        if node not in self._node:
            raise ValueError(f"detail: {node!r} is not a node of lab {self.lab.name}")
        st = self._node[node]
        links = [
            {
                "node": lk["b"] if lk["a"] == node else lk["a"],
                **{k: v for k, v in lk.items() if k not in ("a", "b")},
            }
            for lk in self.links
            if node in (lk["a"], lk["b"])
        ]
        return {
            "type": "detail",
            "node": node,
            "position": self.positions.get(node),
            "medium_links": links,
            "neighbours": self.neighbour_view().get(node, []),
            "daemon": st.daemon.to_wire() if st.daemon is not None else None,
            "daemon_error": st.daemon_error,
            "proxy": st.proxy,
            "kernel_routes": st.routes,
            "peer_neighbours": st.peer_neighbours,
        }

    def lab_section(self) -> dict[str, Any]:
        return {
            "name": self.lab.name,
            "kind": self.lab.kind,
            "stack": self.lab.stack,
            "proxy": self.lab.proxy,
            "nodes": list(self.nodes),
            "area": list(self.lab.area) if self.lab.area else None,
            "ranges": self.ranges or None,
            "rates": {"frame_s": self.rates.frame_s, "status_s": self.rates.status_s},
        }

    def _sections(self, now: float, names: Iterable[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            if name == "lab":
                out["lab"] = self.lab_section()
            elif name == "nodes":
                out["nodes"] = self.node_summary()
            elif name == "links":
                out["links"] = self.links
                out["cs"] = self.cs
            elif name == "routing":
                out["routing"] = self.routing_links()
            elif name == "flows":
                out["flows"] = self.flows(now)
            elif name == "fidelity":
                out["fidelity"] = self.fidelity
        return out

    def snapshot(self, now: float) -> dict[str, Any]:
        """The whole state, for a page that just connected."""
        msg = {
            "type": "frame",
            "full": True,
            "now": round(now, 3),
            "t": self.t,
            "positions": self.positions,
            **self._sections(now, ("lab", "nodes", "links", "routing", "flows", "fidelity")),
            "events": list(self.events),
        }
        if self.gone is not None:
            msg["gone"] = self.gone
        return msg

    def _push_frame(self, now: float) -> None:
        msg = {
            "type": "frame",
            "full": False,
            "now": round(now, 3),
            "t": self.t,
            "positions": self.positions,
            **self._sections(now, sorted(self._dirty)),
        }
        if self._new_events:
            msg["events"] = self._new_events
        self._dirty.clear()
        self._new_events = []
        self.frames += 1
        self._out.append(Push(msg))


def _rate(f: dict[str, Any]) -> float:
    rates = [f.get(k) for k in ("goodput_bps", "delivered_bps", "sent_bps")]
    return max((float(r) for r in rates if isinstance(r, int | float)), default=0.0)


def _mutual(f: dict[str, Any], back: dict[str, Any] | None) -> bool:
    """``back`` is ``f`` the other way over the same nodes (no backups to tell apart)."""
    return (
        back is not None
        and f["complete"]
        and back["complete"]
        and back["path"] == f["path"][::-1]
        and not back["backups"]
        and not f["backups"]
    )


def merge_reverse(flows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A flow and its reverse over the same nodes (a TCP flow's ACKs, ping's replies) as
    one entry: the busier direction, with ``reverse`` holding the other's rates."""
    by_id = {f["id"]: f for f in flows}
    out = []
    merged: set[str] = set()
    for f in flows:
        if f["id"] in merged:
            continue
        back = by_id.get(f"{f['dst']}>{f['src']}")
        if back is None or back["id"] in merged or not _mutual(f, back):
            out.append(f)
            continue
        lead, other = (back, f) if _rate(back) > _rate(f) else (f, back)
        merged.update((f["id"], back["id"]))
        lead["reverse"] = {
            k: other.get(k) for k in ("goodput_bps", "delivered_bps", "sent_bps", "seen")
        }
        out.append(lead)
    return out


def describe_event(node: str, name: str, obj: dict[str, Any], index: dict[str, str]) -> str:
    """One line for the timeline: ``n1: route to n5 down (link n3-n4 broken)``."""

    def nd(addr: Any) -> str:
        return node_of_address(addr, index) or str(addr)

    def path(p: Any) -> str:
        return " ".join(nd(a) for a in p) if isinstance(p, list | tuple) else "-"

    if name == "route-up":
        via = f" via {nd(obj.get('next_hop'))}" if obj.get("next_hop") else ""
        extra = f": {path(obj['path'])}" if obj.get("path") else ""
        kind = " (backup)" if obj.get("primary") is False else ""
        return f"{node}: route to {nd(obj.get('dst'))} up{via}{kind}{extra}"
    if name == "route-down":
        why = obj.get("reason", "")
        link = obj.get("broken_link")
        if isinstance(link, list | tuple) and len(link) == 2:
            why = f"{why}, link {nd(link[0])}-{nd(link[1])}"
        pred = " (predicted)" if obj.get("predicted") else ""
        return f"{node}: route to {nd(obj.get('dst'))} down{pred} ({why})"
    if name == "predicted-failure":
        eta = obj.get("eta_s")
        eta_s = f" in {eta:.1f} s" if isinstance(eta, int | float) else ""
        return f"{node}: link to {nd(obj.get('neighbour'))} predicted to fail{eta_s}"
    if name == "path-switch":
        return (
            f"{node}: path to {nd(obj.get('dst'))} switched ({obj.get('reason', '')}): "
            f"{path(obj.get('from_path'))} -> {path(obj.get('to_path'))}"
        )
    if name in ("erdn", "ersn"):
        what = "broke" if name == "erdn" else "repaired"
        return f"{node}: TCP-BuS: route to {nd(obj.get('dst'))} {what} at {nd(obj.get('pivot'))}"
    if name == "elfn-freeze":
        by = obj.get("frozen_by") or "route-down"
        return f"{node}: proxy session to {obj.get('dst', '?')} frozen ({by})"
    if name == "elfn-resume":
        return f"{node}: proxy session to {obj.get('dst', '?')} resumed"
    return f"{node}: {name}"
