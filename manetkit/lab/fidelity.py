"""Did the emulation hold? A lab run's fidelity, measured over its traffic window.

A lab on one machine is only an emulation of an 802.11 network while its medium keeps
up with real time and nothing drops frames that the model did not decide to drop. Two
readings of a lab (:func:`collect`: at a window's start and at its end) subtract into a
:class:`Fidelity` of that window:

- the medium's *scheduling lag* (:mod:`manetkit.lab.medium.lag`): how late its outputs
  were handed out against the virtual schedule, p50/p99/max over the window and per
  second;
- drops the model decided (interface-queue overflow, random or interference losses:
  part of the physics) and drops it did not (a datagram the medium could not hand out;
  a radio's TAP that refused a write or whose queue overflowed because the relay read
  too slowly; a radio process's socket that refused a frame; link events a slow
  subscriber missed: ``manetkit.lab.radioport.RadioPort.unmodelled``): any of the latter
  makes the run invalid. With shared radios the medium reports the radios' counters
  itself; with radio processes :func:`collect` asks each radio;
- CPU seconds per process class (medium, radios, daemons, proxies, peers, traffic),
  the machine's load average and the share of its CPU time that the hypervisor gave to
  other guests (``steal_pct``, /proc/stat's steal column; proc(5)), so a reader sees
  where the cores went, and whether a late window was the lab's doing or the host's.

:func:`verdict` applies :class:`Thresholds` (lag p99 <= 5 ms, no unmodelled drops by
default); an experiment keeps invalid runs out of every claim (docs/experiments.md).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from manetkit.lab import netns
from manetkit.lab.medium.lag import EDGES_US, percentile_us

PROCESS_CLASSES = ("medium", "radios", "daemons", "proxies", "peers", "traffic")


@dataclass(frozen=True, slots=True)
class Thresholds:
    """When a run counts as a faithful emulation."""

    lag_p99_ms: float = 5.0
    unmodelled_drops: int = 0  # frames lost outside the model allowed in a window


@dataclass(slots=True)
class Reading:
    """One reading of a lab: cumulative since its medium started."""

    t: float  # medium time (s)
    lag_counts: list[int]
    seconds: list[list]  # [second, count, p50_us, p99_us, max_us] rows
    modelled: dict[str, int]
    unmodelled: dict[str, int]
    cpu_s: dict[str, float]
    load_avg: tuple[float, float, float]
    cpu_jiffies: tuple[int, int] = (0, 0)  # the machine's (steal, total) so far

    @classmethod
    def from_medium(
        cls,
        reply: dict,
        cpu_s: dict[str, float] | None = None,
        load_avg: tuple[float, float, float] = (0.0, 0.0, 0.0),
        extra_unmodelled: dict[str, int] | None = None,
        cpu_jiffies: tuple[int, int] = (0, 0),
    ) -> Reading:
        """From the medium's ``{"cmd": "fidelity"}`` reply (docs/medium.md)."""
        lag = reply["lag"]
        if list(lag["edges_us"]) != list(EDGES_US):
            raise ValueError("the medium's lag histogram has other bucket edges")
        drops = reply.get("drops", {})
        unmodelled = dict(drops.get("unmodelled", {}))
        for k, v in (extra_unmodelled or {}).items():
            unmodelled[k] = unmodelled.get(k, 0) + v
        return cls(
            t=float(reply["t"]),
            lag_counts=list(lag["counts"]),
            seconds=[list(r) for r in lag.get("seconds", [])],
            modelled=dict(drops.get("modelled", {})),
            unmodelled=unmodelled,
            cpu_s=dict(cpu_s or {}),
            load_avg=load_avg,
            cpu_jiffies=cpu_jiffies,
        )


@dataclass(slots=True)
class Fidelity:
    """A window's fidelity (JSON-ready through :meth:`to_json`)."""

    start_t: float
    end_t: float
    outputs: int
    lag_p50_ms: float | None
    lag_p99_ms: float | None
    lag_max_ms: float | None
    per_second: list[list] = field(default_factory=list)
    modelled_drops: dict[str, int] = field(default_factory=dict)
    unmodelled_drops: dict[str, int] = field(default_factory=dict)
    cpu_s: dict[str, float] = field(default_factory=dict)
    load_avg: tuple[float, float, float] = (0.0, 0.0, 0.0)
    steal_pct: float | None = None  # of the machine's CPU time, taken by the hypervisor
    valid: bool = False
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        d = asdict(self)
        d["load_avg"] = list(self.load_avg)
        return d

    @classmethod
    def from_json(cls, d: dict) -> Fidelity:
        d = dict(d)
        d["load_avg"] = tuple(d.get("load_avg", (0.0, 0.0, 0.0)))
        return cls(**d)


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def _diff(b: dict, a: dict) -> dict:
    return {k: v - a.get(k, 0) for k, v in b.items() if v - a.get(k, 0)}


def window(a: Reading, b: Reading, thresholds: Thresholds | None = None) -> Fidelity:
    """The fidelity of the window between readings ``a`` and ``b`` of the same medium."""
    if b.t < a.t:
        raise ValueError("the readings are out of order (or of two media)")
    counts = [y - x for x, y in zip(a.lag_counts, b.lag_counts, strict=True)]
    if any(c < 0 for c in counts):
        raise ValueError("the lag histogram went down: two different media?")
    rows = [r for r in b.seconds if int(a.t) <= r[0] <= b.t]
    maxes = [r[4] for r in rows]
    p99 = percentile_us(counts, 0.99)
    f = Fidelity(
        start_t=a.t,
        end_t=b.t,
        outputs=sum(counts),
        lag_p50_ms=_ms(percentile_us(counts, 0.5)),
        lag_p99_ms=_ms(p99),
        lag_max_ms=_ms(max(maxes)) if maxes else None,
        per_second=rows,
        modelled_drops=_diff(b.modelled, a.modelled),
        unmodelled_drops=_diff(b.unmodelled, a.unmodelled),
        cpu_s={k: round(v - a.cpu_s.get(k, 0.0), 3) for k, v in b.cpu_s.items()},
        load_avg=b.load_avg,
        steal_pct=_steal_pct(a.cpu_jiffies, b.cpu_jiffies),
    )
    f.valid, f.reasons = verdict(f, thresholds or Thresholds())
    return f


def _steal_pct(a: tuple[int, int], b: tuple[int, int]) -> float | None:
    """The steal share between two (steal, total) readings; None where unread."""
    total = b[1] - a[1]
    return round(100.0 * (b[0] - a[0]) / total, 2) if total > 0 and a[1] > 0 else None


def verdict(f: Fidelity, th: Thresholds) -> tuple[bool, list[str]]:
    """(valid, reasons it is not)."""
    reasons = []
    if f.outputs == 0:
        reasons.append("the medium handed nothing out in the window: no lag measured")
    elif f.lag_p99_ms is not None and f.lag_p99_ms > th.lag_p99_ms:
        reasons.append(f"medium scheduling lag p99 {f.lag_p99_ms:.3g} ms > {th.lag_p99_ms:g} ms")
    lost = sum(f.unmodelled_drops.values())
    if lost > th.unmodelled_drops:
        what = ", ".join(f"{k} {v}" for k, v in sorted(f.unmodelled_drops.items()))
        reasons.append(f"{lost} frames dropped outside the model ({what})")
    return not reasons, reasons


# --- collection (I/O) -------------------------------------------------------------


def process_class(argv: list[str]) -> str:
    """Which of :data:`PROCESS_CLASSES` a lab process belongs to, by its argv."""
    text = " ".join(argv)
    name = os.path.basename(argv[0]) if argv else ""
    if "lab medium" in text or "manetkit.lab.medium" in text:
        return "medium"
    if "manetkit.lab.radio" in text or "lab radio" in text:
        return "radios"
    if "manetkit.daemon" in text:
        return "daemons"
    if "manetkit.proxy" in text:
        return "proxies"
    if name in ("babeld", "batmand") or "manetkit.lab.peerrun" in text:
        return "peers"
    return "traffic"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_jiffies(stat: Path = Path("/proc/stat")) -> tuple[int, int]:
    """The machine's (steal, total) CPU time in clock ticks since boot: the first line
    of /proc/stat (proc(5): user nice system idle iowait irq softirq steal ...; guest
    time is already inside user and nice, so it is not added again)."""
    fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:9]]
    fields += [0] * (8 - len(fields))
    return fields[7], sum(fields)


def _netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def lab_pids(lab: str) -> set[int]:
    """The lab's manetkit processes (``--lab LAB``) and every process in its namespaces."""
    from manetkit.lab.inventory import find_processes, namespaces

    inodes = set()
    for ns in namespaces(lab):
        try:
            inodes.add(os.stat(netns.NETNS_RUN_DIR / ns).st_ino)
        except OSError:
            continue
    pids = set(find_processes(lab))
    if inodes:
        for entry in os.listdir("/proc"):
            if entry.isdigit() and _netns_inode(int(entry)) in inodes:
                pids.add(int(entry))
    return pids


def cpu_by_class(pids: set[int]) -> dict[str, float]:
    """CPU seconds (user + system) so far of the live ``pids``, summed per class."""
    out = dict.fromkeys(PROCESS_CLASSES, 0.0)
    for pid in pids:
        try:
            out[process_class(netns.cmdline(pid))] += _cpu_seconds(pid)
        except (OSError, IndexError, ValueError):
            continue  # gone between the listing and the read
    return {k: round(v, 3) for k, v in out.items()}


def radio_unmodelled(lab: str, timeout: float = 2.0) -> dict[str, int]:
    """The radio processes' losses outside the model, summed over the lab's nodes (those
    whose radio answers)."""
    from manetkit import jsonlines, paths
    from manetkit.lab.inventory import namespaces
    from manetkit.lab.radioport import sum_unmodelled

    got = []
    for ns in namespaces(lab):
        node = ns.rsplit("-", 1)[1]
        try:
            reply = jsonlines.request(
                paths.radio_control_socket(lab, node), {"cmd": "stats"}, timeout
            )
        except (OSError, ValueError):
            continue
        got.append(reply.get("unmodelled") or {})
    return sum_unmodelled(got)


def collect(lab: str, timeout: float = 5.0) -> Reading:
    """Read the lab now: the medium's lag and drops (the radios' included), CPU per
    class, the load average."""
    from manetkit.lab.medium.control import control

    reply = control(lab, {"cmd": "fidelity"}, timeout=timeout)
    if not reply.get("ok"):
        raise ValueError(f"the medium of lab {lab!r} did not report fidelity: {reply}")
    extra = radio_unmodelled(lab) if reply.get("radios") != "shared" else None
    return Reading.from_medium(
        reply,
        cpu_s=cpu_by_class(lab_pids(lab)),
        load_avg=os.getloadavg(),
        extra_unmodelled=extra,
        cpu_jiffies=cpu_jiffies(),
    )
