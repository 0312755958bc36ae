"""A run's CBR/UDP background (spec ``background:``, Dyer & Boppana section III): one
``manetkit.bench.cbr`` sender and receiver per flow, started with the traffic and
stopped after its window; what each end counted goes into the run's JSON."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from manetkit import procs
from manetkit.bench import cbr
from manetkit.bench.labrun import ns_python
from manetkit.experiment.spec import Background, Pair
from manetkit.lab.stacks import node_address

BASE_PORT = 5600  # above bulk's iperf3 ports (5201 + flows)


@dataclass
class CbrFlow:
    src: str
    dst: str
    port: int
    sent_out: Path
    received_out: Path
    ends: tuple[subprocess.Popen[bytes], subprocess.Popen[bytes]]


def start(lab: str, bg: Background, pairs: list[Pair], work: Path) -> list[CbrFlow]:
    """Receivers first, then the senders at ``bg``'s rate."""
    flows = []
    for k, (src, dst) in enumerate(pairs):
        port = BASE_PORT + k
        rx, tx = work / f"cbr-{k}-recv.json", work / f"cbr-{k}-send.json"
        for f in (rx, tx):
            f.unlink(missing_ok=True)
        recv = ns_python(lab, dst, "manetkit.bench.cbr", "recv", str(port), "--out", str(rx),
                         "--bind", str(node_address(dst)))  # fmt: skip
        send = ns_python(lab, src, "manetkit.bench.cbr", "send", str(node_address(dst)),
                         str(port), "--bytes", str(bg.packet_bytes), "--pps", f"{bg.pps():.6g}",
                         "--out", str(tx))  # fmt: skip
        flows.append(CbrFlow(src, dst, port, tx, rx, (recv, send)))
    return flows


def stop(flows: list[CbrFlow]) -> None:
    procs.stop_all([p for f in flows for p in f.ends], grace=5)


def results(bg: Background, flows: list[CbrFlow]) -> dict[str, Any]:
    """Per flow what was sent and received (None: that end wrote nothing), and the share
    of the sent datagrams the mesh delivered over all flows."""
    per = [
        {
            "src": f.src,
            "dst": f.dst,
            "sent": cbr.read(f.sent_out, "sent"),
            "send_errors": cbr.read(f.sent_out, "errors"),
            "received": cbr.read(f.received_out, "received"),
        }
        for f in flows
    ]
    sent = sum(p["sent"] or 0 for p in per)
    got = sum(p["received"] or 0 for p in per)
    return {
        "offered_kbps": bg.kbps,
        "packet_bytes": bg.packet_bytes,
        "flows": per,
        "sent": sent,
        "received": got,
        "delivery_ratio": round(got / sent, 3) if sent else None,
    }
