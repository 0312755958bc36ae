"""``manetkit bench chain``: TCP throughput over a static chain of 1..N hops (T_i).

Holland & Vaidya, Section 3 and Fig. 1 (after Gerla et al. [17]): nodes on a line, 802.11
at 2 Mbps, one TCP transfer from the first to the last node of an i-hop chain. T_i is the
denominator of "expected throughput" (eq. 3.1; docs/experiments.md "Expected throughput"). Because neighbours
along the chain share the channel, T_i is bounded by C/i for i <= 3 and by C/3 beyond, and
ACK contention pulls it a little lower from 4 hops on.

One lab of N+1 nodes, 200 m apart on the ns2 profile (in range of the next node only,
within carrier sense of the next two), is brought up. On a realistic profile
(``--set radio.profile=outdoor`` or a realistic ``--scenario``) the default spacing is
60 % of the distance where the profile's usable-link rule ends (``channel.py``: 72 m for
outdoor 802.11b at 11 Mbit/s, 23 m for 802.11g at 54), so every hop is a usable link
with a few dB to spare and the ground truth of the experiments counts hops the same
way; shadowing is off (every hop alike, as on ns2; ``--set
radio.shadowing_sigma_db=4`` measures one shadowed realization), fading stays on; the
rate defaults to the scenario's (the profile's data rate). Its radio and propagation come from the shipped
``configs/scenarios/chain-<N+1>.yaml`` (``chain-9.yaml`` for longer chains), or from
``--scenario``: in particular ``radio.rts_threshold: 0``, RTS/CTS before every unicast as
in the paper's ns-2 runs; ``--set`` overrides fields as for ``lab up``. The lab is then the kernel forwards over ``radio0`` with static routes
(plain ``ip route``), so the numbers measure the medium, not a routing daemon. iperf3 then
runs from n1 to n(i+1) for i = 1..N (a transfer that has not ended 60 s after its
duration counts 0 and is listed under ``stalled``: a chain that collapsed under loss).
The lab is always brought down.

TCP's congestion control is set in every node (``--congestion-control``, CUBIC by
default, as ``manetkit experiment`` runs; a new namespace would otherwise take the host's
default, BBR on some machines), so a table made here is the T_i of the runs it divides.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import yaml
from rich.table import Table

from manetkit import paths, procs
from manetkit.bench import report
from manetkit.errors import UserError
from manetkit.lab import netns, nodes, scenario, tcpcc
from manetkit.lab.build import phy_profile_from_scenario
from manetkit.lab.medium import protocol
from manetkit.lab.medium.channel import usable_distance_m
from manetkit.lab.scenario import SHIPPED_SCENARIOS
from manetkit.macaddr import format_mac

SUBNET = "10.43.0"
IPERF_PORT = 5201
# Holland & Vaidya Fig. 1 / Gerla et al.: T_i/T_1 ~ 1/i up to 3 hops, then a plateau
# (somewhat below 1/3 because of the ACKs' backward contention).
PAPER_RATIO = {1: 1.0, 2: 0.5, 3: 0.33}
PAPER_PLATEAU = "~0.25-0.33"


def addr(k: int) -> str:
    return f"{SUBNET}.{k}"


SHIPPED = SHIPPED_SCENARIOS
LONGEST_SHIPPED = 9
NS2_SPACING_M = 200.0
REALISTIC_SPACING = 0.6  # of the usable-link distance


def shipped_chain(hosts: int) -> Path:
    """The shipped scenario whose radio settings a chain of ``hosts`` nodes uses."""
    return SHIPPED / f"chain-{min(max(hosts, 2), LONGEST_SHIPPED)}.yaml"


def chain_scenario(
    hosts: int,
    rate_mbps: float | None,
    spacing_m: float | None,
    base: Path | None = None,
    overrides: dict[str, str] | None = None,
) -> dict:
    """The benchmark's scenario: ``base``'s fields (radio, propagation, seed), with the node
    count, rate and a static line of ``spacing_m`` set by the benchmark, then ``overrides``.
    ``rate_mbps`` None keeps the scenario's rate; ``spacing_m`` None is 200 m on the ns2
    profile and :data:`REALISTIC_SPACING` of the usable-link distance on a realistic one."""
    path = base or shipped_chain(hosts)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"bench chain: cannot read the chain scenario {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a scenario must be a YAML mapping")
    data.pop("name", None)  # the benchmark names its own lab
    data["nodes"] = hosts
    data["stack"] = data["proxy"] = "none"  # static routes: the medium alone is measured
    if rate_mbps is not None:
        data.setdefault("radio", {})["rate_mbps"] = rate_mbps
    data["mobility"] = {"model": "static", "layout": {"kind": "line", "spacing": 1.0}}
    data = scenario.apply_overrides(data, overrides or {})
    sc = scenario.scenario_from_dict(data, str(path), path.parent)  # refuse a bad one now
    if sc.radio.profile != "ns2":
        data.pop("propagation", None)  # the shipped chains' two-ray section: ns2's only
        # Every hop alike, as on ns2: no shadowing unless asked for (one realization of
        # it can put a hop below the usable-link rule and measure a broken chain).
        data["radio"].setdefault("shadowing_sigma_db", 0.0)
    if spacing_m is None:
        spacing_m = NS2_SPACING_M
        if sc.radio.profile != "ns2":
            spacing_m = round(
                REALISTIC_SPACING * usable_distance_m(phy_profile_from_scenario(sc)), 1
            )
    data["mobility"] = {"model": "static", "layout": {"kind": "line", "spacing": spacing_m}}
    scenario.scenario_from_dict(data, str(path), path.parent)
    return data


def configure_chain(lab: str, hosts: int) -> None:
    """Addresses on radio0, kernel forwarding and host routes along the line."""
    for k in range(1, hosts + 1):
        ns = paths.netns_name(lab, f"n{k}")
        # Forwarding back out of the interface a packet came in on is the whole point
        # here: no ICMP redirects, no reverse-path filter. IPv6 off keeps the air quiet.
        netns.sysctl(
            ns,
            {
                "net.ipv4.ip_forward": 1,
                "net.ipv4.conf.all.send_redirects": 0,
                "net.ipv4.conf.radio0.send_redirects": 0,
                "net.ipv4.conf.all.rp_filter": 0,
                "net.ipv4.conf.radio0.rp_filter": 0,
                "net.ipv4.conf.all.accept_redirects": 0,
                "net.ipv6.conf.radio0.disable_ipv6": 1,
            },
        )
        batch = [f"addr add {addr(k)}/24 dev radio0"]
        # Neighbours' MACs are known (protocol.node_mac): permanent entries keep ARP
        # traffic and its timeouts out of the measurement.
        for j in (k - 1, k + 1):
            if 1 <= j <= hosts:
                mac = format_mac(protocol.node_mac(j))
                batch.append(f"neigh replace {addr(j)} lladdr {mac} dev radio0 nud permanent")
        for j in range(1, hosts + 1):
            if abs(j - k) > 1:
                via = addr(k + 1) if j > k else addr(k - 1)
                batch.append(f"route add {addr(j)}/32 via {via} dev radio0")
        netns.run(ns, ["ip", "-batch", "-"], input="\n".join(batch) + "\n")


class Transfer(NamedTuple):
    """One iperf3 run: the receiver's bits per second and what the sender's kernel saw
    (iperf3's ``end.streams[0].sender``: mean and max smoothed RTT, segments resent)."""

    bps: float
    sender: dict[str, float | int | None]


def iperf_tcp(lab: str, src: int, dst: int, duration: float, attempts: int = 3) -> Transfer:
    """Bulk TCP from n<src> to n<dst> for ``duration`` s.

    A run whose report is incomplete (iperf3's control connection can stall on a loaded
    two-core machine) is repeated, up to ``attempts`` times, with a fresh server.
    """
    last = ""
    for _attempt in range(attempts):
        try:
            return _iperf_once(lab, src, dst, duration)
        except _IperfFailed as exc:
            last = str(exc)
    raise UserError(f"iperf3 n{src} -> n{dst} failed {attempts} times: {last}")


class _IperfFailed(Exception):
    pass


class Stalled(Exception):
    """The transfer did not end within its duration + 60 s: the chain carries next to
    nothing (a path that collapsed under loss), a measurement rather than a failure."""


def _sender(result: dict) -> dict[str, float | int | None]:
    """The sender's RTT (ms) and retransmitted segments of an iperf3 -J report."""
    streams = result.get("end", {}).get("streams") or [{}]
    snd = streams[0].get("sender", {})

    def ms(key: str) -> float | None:
        return round(snd[key] / 1000, 1) if isinstance(snd.get(key), int | float) else None

    return {
        "mean_rtt_ms": ms("mean_rtt"),
        "max_rtt_ms": ms("max_rtt"),
        "retransmits": snd.get("retransmits"),
    }


def _iperf_once(lab: str, src: int, dst: int, duration: float) -> Transfer:
    server = netns.popen(
        paths.netns_name(lab, f"n{dst}"),
        ["iperf3", "-s", "-1", "-p", str(IPERF_PORT), "--bind", addr(dst)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        omit = 1 if duration >= 4 else 0  # leave slow start out of longer runs
        argv = ["iperf3", "-c", addr(dst), "-p", str(IPERF_PORT), "-t", f"{duration:g}"]
        argv += ["-O", str(omit), "-J", "--connect-timeout", "3000"]
        for _ in range(20):  # the server needs a moment to listen
            try:
                proc = netns.run(
                    paths.netns_name(lab, f"n{src}"), argv, check=False, timeout=duration + 60
                )
            except subprocess.TimeoutExpired:
                raise Stalled(f"no end after {duration + 60:g} s") from None
            if "refused" not in proc.stdout + proc.stderr:
                break
            time.sleep(0.1)
        try:
            result = json.loads(proc.stdout)
            return Transfer(
                float(result["end"]["sum_received"]["bits_per_second"]), _sender(result)
            )
        except (ValueError, KeyError, TypeError):
            error = proc.stderr.strip()[-300:]
            with contextlib.suppress(ValueError, AttributeError):
                error = json.loads(proc.stdout).get("error") or error
            raise _IperfFailed(f"exit {proc.returncode}: {error or 'incomplete report'}") from None
    finally:
        procs.stop(server)


def measure(
    max_hops: int,
    duration: float,
    rate_mbps: float,
    spacing_m: float,
    base: Path | None = None,
    overrides: dict[str, str] | None = None,
    cc: str = "cubic",
) -> dict:
    hosts = max_hops + 1
    lab = f"bch{os.getpid() % 100000}"
    data = chain_scenario(hosts, rate_mbps, spacing_m, base, overrides)
    radio = scenario.scenario_from_dict(data).radio
    spacing_m = data["mobility"]["layout"]["spacing"]
    with tempfile.TemporaryDirectory(prefix="manetkit-chain-") as tmp:
        scen_path = Path(tmp) / "chain.yaml"
        scen_path.write_text(yaml.safe_dump(data))
        try:
            nodes.up(scen_path, name=lab)
            configure_chain(lab, hosts)
            tcp = tcpcc.set_lab(lab, [f"n{k}" for k in range(1, hosts + 1)], cc)
            tput = []
            senders: list[dict] = []
            stalled: dict[int, str] = {}
            for i in range(1, max_hops + 1):
                try:
                    bps, sender = iperf_tcp(lab, 1, i + 1, duration)
                except Stalled as exc:  # counted as 0 and said so, the longer chains still run
                    bps, sender, stalled[i] = 0.0, {}, str(exc)
                tput.append(bps)
                senders.append(sender)
                note = f" (stalled: {stalled[i]})" if i in stalled else ""
                report.console.print(
                    f"  {i} hop{'s' if i > 1 else ''}: {bps / 1e6:.3f} Mbit/s{note}"
                )
                time.sleep(0.5)  # let the previous flow's queues drain
        finally:
            nodes.down(lab)
    ratios = [t / tput[0] if tput[0] else 0.0 for t in tput]
    return {
        "rate_bps": int(radio.rate_mbps * 1e6),
        "profile": radio.profile,
        "scenario": str(base or shipped_chain(hosts)),
        "overrides": overrides or {},
        "radio": radio.model_dump(),
        "spacing_m": spacing_m,
        "duration_s": duration,
        "tcp": tcp,
        "hops": list(range(1, max_hops + 1)),
        "throughput_bps": [round(t) for t in tput],
        # the sender's mean / max RTT and resent segments per chain: the queue's share
        "sender_tcp": senders,
        "stalled": {str(h): why for h, why in stalled.items()},  # counted as 0 above
        "ratios": [round(r, 4) for r in ratios],
        "paper_ratios": [PAPER_RATIO.get(i) for i in range(1, max_hops + 1)],
    }


def plot(result: dict, path: Path) -> None:
    plt = report.pyplot()
    hops = result["hops"]
    mbps = [t / 1e6 for t in result["throughput_bps"]]
    t1 = mbps[0]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(hops, mbps, "o-", label="measured (lab, kernel forwarding)")
    # Holland & Vaidya's bound: C/i up to 3 hops, C/3 beyond (with T_1 standing for C).
    ax.plot(hops, [t1 / min(i, 3) for i in hops], "--", label="paper's bound T1 / min(i, 3)")
    ax.set_xlabel("hops")
    ax.set_ylabel("TCP throughput (Mbit/s)")
    ax.set_title(f"Static chain, 802.11 at {result['rate_bps'] / 1e6:g} Mbit/s")
    ax.set_ylim(bottom=0)
    ax.set_xticks(hops)
    ax.grid(alpha=0.3)
    ax.legend()
    report.save_figure(fig, path, dpi=120)


def print_table(result: dict) -> None:
    t = Table(
        "hops", "throughput (Mbit/s)", "T_i/T_1", "paper T_i/T_1", "sender RTT mean / max ms",
        "segments resent",
        title=(
            f"bench chain at {result['rate_bps'] / 1e6:g} Mbit/s, RTS threshold "
            f"{result['radio']['rts_threshold']} ({result['duration_s']:g} s per run)"
        ),
    )  # fmt: skip
    senders = result.get("sender_tcp") or [{}] * len(result["hops"])
    for i, bps, r, snd in zip(
        result["hops"], result["throughput_bps"], result["ratios"], senders, strict=True
    ):
        paper = PAPER_RATIO.get(i)
        rtt = (snd.get("mean_rtt_ms"), snd.get("max_rtt_ms"))
        t.add_row(
            str(i), f"{bps / 1e6:.3f}", f"{r:.2f}", f"{paper:.2f}" if paper else PAPER_PLATEAU,
            " / ".join("-" if x is None else f"{x:.0f}" for x in rtt),
            str(snd.get("retransmits", "-")),
        )  # fmt: skip
    report.show(
        t,
        "paper: T_1 near 1.4 Mbit/s at 2 Mbit/s (1460-byte TCP), T_2/T_1 ~ 0.5, "
        "T_3/T_1 ~ 0.33, plateau from 4 hops",
    )


def run(args: argparse.Namespace) -> int:
    if not 1 <= args.max_hops <= 30:
        raise UserError("--max-hops must be between 1 and 30")
    if args.duration <= 0:
        raise UserError("--duration must be > 0 seconds")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tcpcc.require([args.congestion_control])
    with tcpcc.allowing([args.congestion_control]):
        result = measure(
            args.max_hops,
            args.duration,
            args.rate,
            args.spacing,
            Path(args.scenario) if args.scenario else None,
            scenario.parse_set_args(args.set),
            args.congestion_control,
        )
    plot(result, out / "chain.png")
    print_table(result)
    report.write(out, "chain", result)
    report.console.print(f"plot: {out / 'chain.png'}")
    return 0


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-hops", type=int, default=6, help="longest chain, in hops (6)")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per iperf3 run (10)")
    parser.add_argument(
        "--rate", type=float, default=None, help="802.11 rate in Mbit/s (the scenario's: 2)"
    )
    parser.add_argument(
        "--spacing",
        type=float,
        default=None,
        help="metres between nodes (ns2: 200, in range of the next only; realistic: 60%% of "
        "the usable-link distance)",
    )
    parser.add_argument(
        "--scenario",
        help="take radio/propagation from this scenario (default: the shipped chain-N.yaml)",
    )
    parser.add_argument(
        "--congestion-control",
        default="cubic",
        help="TCP congestion control in every node, one the kernel has (cubic: what "
        "manetkit experiment runs by default; reno: the papers')",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario field, e.g. --set radio.rts_threshold=2347 (repeatable)",
    )
    parser.set_defaults(func=run)
