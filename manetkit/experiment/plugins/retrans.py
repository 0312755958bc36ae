"""``retrans``: the TCP retransmission ratio of the connections that cross the mesh.

Lim, Xu & Gerla's Fig. 2 definition: retransmitted segments / all data segments sent,
read from ``ss -tin`` in the source node just before the window closes (over the whole
connection so far): ``retrans:cur/total`` and ``data_segs_out`` (which counts the
retransmissions too; ``segs_out``, which also counts pure ACKs, when an older ``ss``
lists no ``data_segs_out``). Without a proxy the connection crossing the mesh is the
application's own (to the destination's port); with one it is the source proxy's mesh leg
to the destination's proxy (its remote port as the source proxy's status names it:
docs/proxy.md, the mesh leg), and the application's connection, which ends at its local
proxy, is left out. A leg the proxy replaced and closed is no longer counted (``resumes``
says how often that happened) and a connection with none at that moment is left out.
"""

from __future__ import annotations

import contextlib
from typing import Any

from manetkit import paths
from manetkit.lab.stacks import node_address, proxy_status
from manetkit.lab.tcpstat import connection_ss, ss_sockets

from .base import HEAD_COLUMNS, Metric, RunContext, group, mean, row_head


def ss_retrans(text: str) -> tuple[int, int] | None:
    """(retransmitted, sent) segments summed over the sockets of ``ss -tin`` output; None
    if it lists no socket."""
    sockets = ss_sockets(text)
    if not sockets:
        return None
    retrans = sum(int(f["retrans"].split("/")[1]) for f in sockets if "/" in f.get("retrans", ""))
    sent = sum(int(f.get("data_segs_out", f["segs_out"])) for f in sockets)
    return retrans, sent


def mesh_port(status: dict[str, Any], peer: str) -> tuple[int | None, int]:
    """From a proxy's status (docs/proxy.md, status socket): the peer proxy's port of
    the mesh leg of a session to ``peer`` (None if no session to it has a leg now), and
    how many times those sessions resumed on a new leg."""
    sessions = [x for x in status.get("sessions", []) if x.get("peer") == peer]
    ports = [x["leg"]["remote_port"] for x in sessions if x.get("leg")]
    return (ports[0] if ports else None), sum(int(x.get("resumes", 0)) for x in sessions)


class Retrans(Metric):
    name = "retrans"
    title = "TCP retransmissions (ss -tin)"
    note = (
        "Retransmitted / data segments sent over the connections that cross the mesh "
        "(the application's own without a proxy, the source proxy's mesh leg with one), "
        "read just before the window closed; summed over a run's connections, mean of the "
        "runs' ratios."
    )
    columns = [*HEAD_COLUMNS, ("retrans ratio", "retrans_ratio", ".4f"),
               ("leg resumes", "resumes", "d")]  # fmt: skip

    def __init__(self) -> None:
        self.got: dict[str, Any] = {}

    def closing(self, ctx: RunContext) -> None:
        retrans = sent = resumes = 0
        per: list[dict[str, Any]] = []
        for c in ctx.connections:
            peer = str(node_address(c.dst))
            port: int | None = c.port
            if ctx.proxy != "none":
                port, more = None, 0
                st = proxy_status(ctx.lab, c.src, timeout=5)
                if st is not None:
                    with contextlib.suppress(KeyError, ValueError):
                        port, more = mesh_port(st, peer)
                resumes += more
            if port is None:
                per.append({"src": c.src, "dst": c.dst, "ss": None})
                continue
            text = connection_ss(paths.netns_name(ctx.lab, c.src), peer, port)
            got = ss_retrans(text)
            per.append({"src": c.src, "dst": c.dst, "port": port,
                        "retransmitted": got[0] if got else None,
                        "sent": got[1] if got else None})  # fmt: skip
            if got is not None:
                retrans += got[0]
                sent += got[1]
        self.got = {
            "retransmitted": retrans,
            "segments_sent": sent,
            "retrans_ratio": round(retrans / sent, 4) if sent else None,
            "resumes": resumes,
            "connections": per,
        }

    def result(self, ctx: RunContext, graph: list[dict[str, Any]]) -> dict[str, Any]:
        return self.got

    @classmethod
    def rows(cls, docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for key, runs in group(docs, cls.name).items():
            r = row_head(key, runs)
            r["retrans_ratio"] = mean(d[cls.name].get("retrans_ratio") for d in runs)
            r["resumes"] = sum(int(d[cls.name].get("resumes") or 0) for d in runs)
            out.append(r)
        return out
