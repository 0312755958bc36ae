"""Control overhead of the peer stacks (babeld, batmand) from nftables counters.

The manetkit daemons count their routing packets (``metrics.control_totals``); babeld and
batmand are real daemons with no such counters the runner can read, so every node of a
peer-stack run gets a small nftables table (``inet mkx_count``, gone with the namespace at
``lab down``) that counts, on ``radio0``:

* **control sent**: UDP to babeld's port 6696 (RFC 8966 section 4, its hellos, IHUs and
  updates; IPv6 link-local multicast) or batmand's 4305 (originator messages) and 4307
  (vis), on the output hook: every packet the daemon originated or re-broadcast;
* **data delivered**: every other packet the node's own host received from ``radio0``
  (input hook: local delivery only, not forwarding), the counterpart of the manetkit
  daemons' TUN writes.

Packets and bytes (IP packet bytes, without the 802.11 header), so ``per_delivered`` is
the same ratio as for the manetkit stacks, with control bytes besides.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from manetkit import paths
from manetkit.lab import netns

TABLE = "mkx_count"
CONTROL_PORTS = (6696, 4305, 4307)  # babeld; batmand originator messages, vis

RULES = f"""
table inet {TABLE} {{
  counter ctl_out {{ }}
  counter data_in {{ }}
  chain out {{
    type filter hook output priority 0; policy accept;
    oifname "radio0" udp dport {{ {", ".join(map(str, CONTROL_PORTS))} }} counter name "ctl_out"
  }}
  chain in {{
    type filter hook input priority 0; policy accept;
    iifname "radio0" udp dport {{ {", ".join(map(str, CONTROL_PORTS))} }} return
    iifname "radio0" counter name "data_in"
  }}
}}
"""


def install(lab: str, n: int) -> None:
    """The counting table in every node of ``lab`` (n1..n``n``)."""
    for i in range(1, n + 1):
        netns.run(paths.netns_name(lab, f"n{i}"), ["nft", "-f", "-"], input=RULES, timeout=20)


def parse(text: str) -> dict[str, int]:
    """``nft -j list counters table inet mkx_count`` -> packets and bytes of both."""
    out = {"control_packets": 0, "control_bytes": 0, "delivered": 0, "delivered_bytes": 0}
    for item in json.loads(text).get("nftables", []):
        c = item.get("counter")
        if not isinstance(c, dict):
            continue
        if c.get("name") == "ctl_out":
            out["control_packets"] += int(c["packets"])
            out["control_bytes"] += int(c["bytes"])
        elif c.get("name") == "data_in":
            out["delivered"] += int(c["packets"])
            out["delivered_bytes"] += int(c["bytes"])
    return out


def totals(lab: str, n: int) -> dict[str, int]:
    """The counters summed over the lab's nodes (read in parallel: ~one nft call's time)."""
    argv = ["nft", "-j", "list", "counters", "table", "inet", TABLE]
    procs = [
        subprocess.Popen(
            netns.exec_argv(paths.netns_name(lab, f"n{i}"), argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for i in range(1, n + 1)
    ]
    total = {"control_packets": 0, "control_bytes": 0, "delivered": 0, "delivered_bytes": 0}
    for p in procs:
        try:
            text, _ = p.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            continue
        if p.returncode == 0:
            for k, v in parse(text).items():
                total[k] += v
    return total


def overhead(before: dict[str, int], after: dict[str, int]) -> dict[str, Any]:
    """Control packets (and bytes) per delivered data packet over the window."""
    d = {k: after[k] - before[k] for k in after}
    delivered = d["delivered"]
    return {
        "control_packets": d["control_packets"],
        "control_bytes": d["control_bytes"],
        "delivered_packets": delivered,
        "delivered_bytes": d["delivered_bytes"],
        "per_delivered": round(d["control_packets"] / delivered, 4) if delivered else None,
        "bytes_per_delivered": round(d["control_bytes"] / delivered, 1) if delivered else None,
        "source": "nftables counters on radio0",
    }
