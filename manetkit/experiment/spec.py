"""The experiment spec (YAML): the matrix scenario x stack x proxy x speed x seed x traffic.

Every field is described in ``docs/experiments.md``. The model refuses unknown fields and
bad values with the field's path and the reason (``manetkit.configfile``); checks that need
the scenarios (node names in ``pairs``, a speed for a static scenario, enough nodes for the
flows) are made at load too, naming the field. Whether a stack is *built* (``babeld``,
``batmand`` come with the lab's peer stacks) is checked by :func:`check_stacks_built`
when a matrix starts, against the lab scenario's own stack list. A peer stack variant
(``babeld-mobile``, ``batmand-mobile``: :data:`STACK_VARIANTS`) is the peer with that
profile, so one matrix holds a peer at each of its profiles side by side.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from manetkit.bench.expected import chain_table as chain_table
from manetkit.configfile import read_yaml_mapping, validate
from manetkit.errors import UserError
from manetkit.lab.peers import PEER_STACKS, BabeldSettings, BatmandSettings
from manetkit.lab.scenario import (
    SHIPPED_SCENARIOS,
    RandomWaypointMobility,
    Scenario,
    load_scenario,
)
from manetkit.proxy.config import ProxyConfig

# Stacks an experiment may name. babeld and batmand are the peers manetkit is compared
# with (real daemons on radio0); a matrix refuses a stack the lab does not build yet when it starts.
MANETKIT_STACKS = ("dsr", "aodv", "smr")
PEER_SETTINGS: dict[str, type[BaseModel]] = {"babeld": BabeldSettings, "batmand": BatmandSettings}
# Peer stack variants: a peer with one of its other profiles (``babeld-mobile`` = the
# lab's ``stack: babeld`` with ``babeld.profile: mobile``), so one spec runs a peer at
# several profiles side by side; the bare name runs the profile of ``set:`` (the peer's
# default, the operator profile ``wireless``, unless ``set:`` says otherwise).
STACK_VARIANTS: dict[str, tuple[str, dict[str, str]]] = {
    f"{peer}-{profile}": (peer, {f"{peer}.profile": profile})
    for peer in PEER_STACKS
    for profile in get_args(PEER_SETTINGS[peer].model_fields["profile"].annotation)
    if profile != PEER_SETTINGS[peer].model_fields["profile"].default
}
STACKS = (*MANETKIT_STACKS, *PEER_STACKS, *STACK_VARIANTS, "none")
PROXIES = ("none", "plain", "fixed-rto", "elfn", "bus")
# ELFN and BuS need the routing daemon's route events: the peers have none.
EVENT_PROXIES = ("elfn", "bus")
# ELFN probe variants: ``elfn-probe0.5`` is the lab's ``proxy: elfn`` with the proxy
# config ``{probe: fixed, probe_interval: 0.5}`` (Holland & Vaidya's Fig. 12 sweep); the
# interval within the proxy config's own bounds for probe_interval.
PROBE_PREFIX = "elfn-probe"
_PROBE_META = ProxyConfig.model_fields["probe_interval"].metadata
PROBE_RANGE: tuple[float, float] = (
    float(next(m.ge for m in _PROBE_META if hasattr(m, "ge"))),
    float(next(m.le for m in _PROBE_META if hasattr(m, "le"))),
)
TRAFFIC_TAGS = ("bulk", "http", "wrk", "stream")
# Metric plug-ins a spec may name (manetkit.experiment.plugins: each adds its part to the
# runs' JSON and a table to the report).
METRICS = ("retrans", "atra", "smr", "flap", "proxy")
# Fields of the proxy config the lab sets per node (a spec's proxy_config may not).
PROXY_NODE_FIELDS = ("daemon_socket", "status_socket")
# The TCP congestion control every node's namespace runs unless the spec says otherwise:
# what Debian, Ubuntu, Fedora, macOS and Windows laptops run by default (a namespace
# would otherwise inherit the host's, BBR on some machines). The papers' reproductions
# set reno (Holland & Vaidya, Anantharaman et al., Lim/Xu/Gerla all use TCP Reno).
DEFAULT_CC = "cubic"
_CC_NAME = re.compile(r"^[a-z][a-z0-9_]{0,15}$")

_NAME = r"^[a-z0-9][a-z0-9_-]{0,31}$"
_VARIANT = re.compile(_NAME)

Pair = tuple[str, str]


def lab_stack(stack: str) -> str:
    """The lab's stack of a spec stack: ``babeld-mobile`` -> ``babeld``; others as named."""
    return STACK_VARIANTS[stack][0] if stack in STACK_VARIANTS else stack


def stack_overrides(stack: str) -> dict[str, str]:
    """The ``lab up --set`` a spec stack adds: a variant's profile (empty for the others)."""
    return dict(STACK_VARIANTS[stack][1]) if stack in STACK_VARIANTS else {}


def is_peer(stack: str) -> bool:
    """babeld, batmand, or one of their variants."""
    return lab_stack(stack) in PEER_STACKS


def probe_interval(proxy: str) -> float | None:
    """The fixed probe interval (s) of an ELFN probe variant (``elfn-probe0.5`` -> 0.5);
    None for the other proxies (validated by the spec)."""
    return float(proxy[len(PROBE_PREFIX) :]) if proxy.startswith(PROBE_PREFIX) else None


def lab_proxy(proxy: str) -> str:
    """The lab's proxy mode of a spec proxy: ``elfn-probe2`` -> ``elfn``; others as named."""
    return "elfn" if probe_interval(proxy) is not None else proxy


def proxy_extra(proxy: str) -> dict[str, Any]:
    """The proxy config a spec proxy adds (``nodes.up``'s ``proxy_config``): an ELFN probe
    variant's fixed interval; empty for the others."""
    every = probe_interval(proxy)
    return {} if every is None else {"probe": "fixed", "probe_interval": every}


def _proxy_name(v: str) -> str:
    if v in PROXIES:
        return v
    if v.startswith(PROBE_PREFIX):
        text = v[len(PROBE_PREFIX) :]
        try:
            every = float(text)
        except ValueError:
            raise ValueError(f"{v}: {text!r} is not seconds (e.g. {PROBE_PREFIX}0.5)") from None
        lo, hi = PROBE_RANGE
        if not lo <= every <= hi:
            raise ValueError(
                f"{v}: probe interval {text} s is outside {lo:g}..{hi:g} s "
                "(the proxy config's probe_interval)"
            )
        if text != f"{every:g}":
            raise ValueError(f"{v}: write it {PROBE_PREFIX}{every:g} (names the runs)")
        return v
    raise ValueError(
        f"Input should be {', '.join(PROXIES)} or {PROBE_PREFIX}<seconds> "
        f"({PROBE_RANGE[0]:g}..{PROBE_RANGE[1]:g}), got {v!r}"
    )


# A proxy of the spec: a lab proxy mode, or an ELFN probe variant.
ProxyName = Annotated[str, AfterValidator(_proxy_name)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Background(_Strict):
    """CBR/UDP flows beside a run's traffic for its whole window (Dyer & Boppana section
    III: 10 flows of 512-byte packets, 100 kbit/s in all)."""

    flows: int = Field(10, ge=1, le=100)
    kbps: float = Field(100.0, gt=0, le=2000, description="offered load of all flows together")
    packet_bytes: int = Field(512, ge=16, le=1472, description="UDP payload per datagram")
    pairs: list[Pair] | None = Field(
        None, description="(sender, receiver) per flow; default: seeded random pairs"
    )

    @model_validator(mode="after")
    def _pairs_match(self) -> Background:
        _one_pair_per_flow(self.pairs, self.flows)
        return self

    def pps(self) -> float:
        """Datagrams per second of each flow."""
        return self.kbps * 1000 / 8 / self.packet_bytes / self.flows


class LinkFlap(_Strict):
    """A link of the lab forced down for ``down_s`` every ``period_s`` during the window,
    the first time ``first_s`` into it (the medium's ``link`` command; ``auto`` between
    breaks: the propagation model decides)."""

    a: str
    b: str
    down_s: float = Field(3.0, gt=0, le=600, description="seconds each break lasts")
    period_s: float = Field(15.0, gt=0, le=3600, description="seconds from break to break")
    first_s: float = Field(5.0, ge=0, le=3600, description="first break, s into the window")
    count: int | None = Field(None, ge=1, le=1000, description="breaks (default: as fit)")

    @model_validator(mode="after")
    def _link_up_between(self) -> LinkFlap:
        if self.a == self.b:
            raise ValueError("a and b must be two different nodes")
        if self.period_s <= self.down_s:
            raise ValueError(
                f"period_s {self.period_s:g} must be longer than down_s {self.down_s:g} "
                "(the link is up in between)"
            )
        return self

    def breaks(self, duration: float) -> list[tuple[float, float]]:
        """(down, up) seconds into a window of ``duration``: every break that fits."""
        out = []
        t = self.first_s
        while t + self.down_s <= duration and (self.count is None or len(out) < self.count):
            out.append((t, t + self.down_s))
            t += self.period_s
        return out


def _proxy_fields(v: dict[str, Any]) -> dict[str, Any]:
    fields = ProxyConfig.model_fields
    for key in v:
        if key in PROXY_NODE_FIELDS:
            raise ValueError(f"{key}: set per node by the lab")
        if key not in fields:
            raise ValueError(f"{key}: not a proxy config field (docs/proxy.md)")
    return v


class _Traffic(_Strict):
    name: str | None = Field(None, pattern=_NAME, description="names the runs (default: kind)")
    link_flap: LinkFlap | None = Field(None, description="a link forced down and up in the window")
    proxy_config: dict[str, Any] = Field(
        default_factory=dict, description="proxy config fields for this traffic's runs"
    )
    background: Background | None = Field(
        None, description="CBR/UDP flows running beside this traffic (default: none)"
    )
    duration_s: float | None = Field(
        None, gt=0, le=3600, description="traffic window; default: the spec's duration_s"
    )
    stacks: list[str] | None = Field(
        None,
        min_length=1,
        description="only these of the spec's stacks run this traffic (default: all of them)",
    )

    _proxy = field_validator("proxy_config")(classmethod(lambda cls, v: _proxy_fields(v)))

    def label(self) -> str:
        raise NotImplementedError

    def endpoints(self) -> list[str]:
        return []

    def flap_endpoints(self) -> list[str]:
        return [self.link_flap.a, self.link_flap.b] if self.link_flap else []

    def background_endpoints(self) -> list[str]:
        return [n for p in (self.background.pairs or []) for n in p] if self.background else []


class Bulk(_Traffic):
    """Bulk TCP with iperf3: ``flows`` simultaneous transfers, one per pair."""

    kind: Literal["bulk"]
    flows: int = Field(1, ge=1, le=50)
    pairs: list[Pair] | None = Field(
        None, description="(sender, receiver) per flow; default: seeded random distinct nodes"
    )

    @model_validator(mode="after")
    def _pairs_match(self) -> Bulk:
        _one_pair_per_flow(self.pairs, self.flows)
        return self

    def label(self) -> str:
        return self.name or f"bulk{self.flows}"

    def endpoints(self) -> list[str]:
        return [n for p in self.pairs or [] for n in p]


class Http(_Traffic):
    """HTTP sessions after Dyer & Boppana (section III): clients fetch a page and its
    embedded objects, think, repeat."""

    kind: Literal["http"]
    clients: int = Field(1, ge=1, le=100)
    servers: int = Field(1, ge=1, le=100)
    pairs: list[Pair] | None = Field(
        None, description="(client, server) per client; default: seeded random nodes"
    )
    think_s: tuple[float, float] = Field(
        (0.0, 15.0), description="think time, uniform in [lo, hi] s (the paper truncates at 15)"
    )
    page_timeout_s: float = Field(30.0, gt=0, le=600, description="a page not done by then fails")
    pages: int = Field(20, ge=1, le=1000, description="pages on each server's site")
    port: int = Field(8080, ge=1, le=65535)

    @field_validator("think_s")
    @classmethod
    def _think_range(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0 <= v[0] <= v[1]:
            raise ValueError("needs 0 <= lo <= hi")
        return v

    @model_validator(mode="after")
    def _pairs_match(self) -> Http:
        if self.pairs is not None:
            if len(self.pairs) != self.clients:
                raise ValueError(
                    f"pairs: {len(self.pairs)} pairs given for clients: {self.clients}"
                )
            servers = {s for _, s in self.pairs}
            if len(servers) != self.servers:
                raise ValueError(
                    f"pairs: {len(servers)} distinct servers for servers: {self.servers}"
                )
            clients = [c for c, _ in self.pairs]
            if len(set(clients)) != len(clients) or set(clients) & servers:
                raise ValueError("pairs: each client once, and no node both client and server")
        return self

    def label(self) -> str:
        return self.name or "http"

    def endpoints(self) -> list[str]:
        return [n for p in self.pairs or [] for n in p]


class Wrk(_Traffic):
    """Raw HTTP load with ``wrk`` (closed loop: ``connections`` keep one request each
    outstanding) from ``client`` to an HTTP server on ``server``."""

    kind: Literal["wrk"]
    client: str = "n1"
    server: str = "n2"
    connections: int = Field(4, ge=1, le=1000)
    threads: int = Field(1, ge=1, le=16)
    port: int = Field(8080, ge=1, le=65535)

    @model_validator(mode="after")
    def _two_nodes(self) -> Wrk:
        if self.client == self.server:
            raise ValueError("client and server must be different nodes")
        return self

    def label(self) -> str:
        return self.name or "wrk"

    def endpoints(self) -> list[str]:
        return [self.client, self.server]


class Stream(_Traffic):
    """A deterministic TCP byte stream per pair (``manetkit.bench.stream``), its receiver
    timing every read: goodput from the window's samples, whether the bytes arrived
    whole, and the first byte after each event (``metrics: [flap]``)."""

    kind: Literal["stream"]
    flows: int = Field(1, ge=1, le=50)
    pairs: list[Pair] | None = Field(
        None, description="(sender, receiver) per flow; default: seeded random distinct nodes"
    )
    reconnect: bool = Field(
        False, description="a sender dials again 1 s after its connection failed (no hash)"
    )
    lead_s: float = Field(
        0.0, ge=0, le=120, description="the streams start this long before the window opens"
    )

    @model_validator(mode="after")
    def _pairs_match(self) -> Stream:
        _one_pair_per_flow(self.pairs, self.flows)
        return self

    def label(self) -> str:
        return self.name or f"stream{self.flows}"

    def endpoints(self) -> list[str]:
        return [n for p in self.pairs or [] for n in p]


Traffic = Annotated[Bulk | Http | Wrk | Stream, Field(discriminator="kind")]


class StackVariant(_Strict):
    """A stack of the spec's own: a lab stack (or a peer variant) with scenario overrides
    for its runs only (``dsr-atra: {stack: dsr, set: {atra.rfp: true}}``)."""

    stack: str
    set: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="scenario overrides of this stack's runs"
    )

    @field_validator("stack")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in STACKS or v == "none":
            raise ValueError(
                f"Input should be a lab stack or a peer variant ({', '.join(STACKS[:-1])})"
            )
        return v

    @field_validator("set")
    @classmethod
    def _no_axes(cls, v: dict[str, Any]) -> dict[str, Any]:
        for key in v:
            if key in ("stack", "proxy", "seed", "mobility.speed"):
                raise ValueError(f"{key}: is a matrix axis (stacks/proxies/seeds/speeds)")
        return v


def _one_pair_per_flow(pairs: list[Pair] | None, flows: int) -> None:
    if pairs is not None:
        if len(pairs) != flows:
            raise ValueError(f"pairs: {len(pairs)} pairs given for flows: {flows}")
        _distinct_ends(pairs)


def _distinct_ends(pairs: list[Pair]) -> None:
    for i, (a, b) in enumerate(pairs):
        if a == b:
            raise ValueError(f"pairs[{i}]: sender and receiver are the same node {a}")


class Expected(_Strict):
    """T_i of Holland & Vaidya's eq. 3.1: a ``manetkit bench chain`` JSON or a table."""

    chain: str | None = Field(None, description="a bench chain result (chain.json)")
    table_kbps: dict[int, float] | None = Field(
        None, description="hops -> TCP throughput over a static chain of that many hops, kbit/s"
    )

    @model_validator(mode="after")
    def _one_source(self) -> Expected:
        if (self.chain is None) == (self.table_kbps is None):
            raise ValueError("give exactly one of chain (a bench chain JSON) or table_kbps")
        for hops, kbps in (self.table_kbps or {}).items():
            if hops < 1 or kbps < 0:
                raise ValueError(f"table_kbps: {hops}: hops must be >= 1 and kbit/s >= 0")
        return self


class FidelityThresholds(_Strict):
    """When a run counts as a faithful emulation (``manetkit.lab.fidelity.Thresholds``);
    a run outside them is invalid and left out of every goal cell."""

    lag_p99_ms: float = Field(5.0, gt=0, le=10_000, description="medium scheduling lag p99")
    unmodelled_drops: int = Field(
        0, ge=0, description="frames lost outside the model allowed in a window"
    )


class Spec(_Strict):
    """An experiment: the matrix and how long each run lasts."""

    name: str = Field(pattern=_NAME, description="names the default results directory")
    scenarios: list[str] = Field(min_length=1, description="shipped name (rwp-30) or YAML path")
    variants: dict[str, StackVariant] = Field(
        default_factory=dict, description="the spec's own stacks: a stack with overrides"
    )
    stacks: list[str] = Field(min_length=1)
    proxies: list[ProxyName] = Field(
        ["none"], min_length=1, description="proxy modes, and elfn-probe<S> probe variants"
    )
    speeds: list[float] = Field(
        [0.0], min_length=1, description="mobility.speed (m/s) of random-waypoint scenarios"
    )
    seeds: list[int] = Field([1], min_length=1, description="scenario seed (movement, flows)")
    repeats: int = Field(
        1, ge=1, le=100, description="runs of each cell (same seed: the emulation's spread)"
    )
    congestion_control: list[str] = Field(
        [DEFAULT_CC],
        min_length=1,
        description="TCP congestion control set in every node's namespace (several: an axis)",
    )
    warmup_s: float = Field(
        60.0,
        ge=0,
        le=600,
        description="medium time at which the window opens, the same in every stack",
    )
    convergence_cap_s: float | None = Field(
        None,
        ge=0,
        le=600,
        description="give up waiting for the pairs' routes at this medium time (default: warmup_s)",
    )
    duration_s: float = Field(100.0, gt=0, le=3600, description="default traffic window")
    fidelity: FidelityThresholds = Field(default_factory=FidelityThresholds)
    metrics: list[Literal[METRICS]] = Field(  # type: ignore[valid-type]
        default_factory=list, description="metric plug-ins every run measures"
    )
    proxy_config: dict[str, Any] = Field(
        default_factory=dict, description="proxy config fields merged into every run's"
    )
    set: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="scenario overrides for every run (as lab up --set)"
    )
    expected: Expected | None = None
    traffics: list[Traffic] = Field(min_length=1)

    # Where the spec file lives (relative scenario / chain paths).
    base_dir: Path = Field(default=Path("."), exclude=True)

    @field_validator("speeds")
    @classmethod
    def _speeds(cls, v: list[float]) -> list[float]:
        for i, s in enumerate(v):
            if s < 0:
                raise ValueError(f"[{i}]: {s} m/s: a speed must be >= 0")
        return _unique(v)

    @field_validator("seeds", "stacks", "proxies", "scenarios", "metrics")
    @classmethod
    def _no_repeats(cls, v: list[Any]) -> list[Any]:
        return _unique(v)

    @field_validator("variants")
    @classmethod
    def _variant_names(cls, v: dict[str, StackVariant]) -> dict[str, StackVariant]:
        for name in v:
            if not _VARIANT.match(name):
                raise ValueError(f"{name}: a variant's name is [a-z0-9][a-z0-9_-]* (no + or @)")
            if name in STACKS:
                raise ValueError(f"{name}: already a stack (choose another name)")
        return v

    @field_validator("stacks")
    @classmethod
    def _stacks_known(cls, v: list[str], info: ValidationInfo) -> list[str]:
        own = info.data.get("variants") or {}
        for i, name in enumerate(v):
            if name not in STACKS and name not in own:
                raise ValueError(
                    f"[{i}]: {name!r}: Input should be {', '.join(STACKS)} or one of the "
                    "spec's variants"
                )
        return v

    _proxy = field_validator("proxy_config")(classmethod(lambda cls, v: _proxy_fields(v)))

    @field_validator("congestion_control", mode="before")
    @classmethod
    def _cc_list(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("congestion_control")
    @classmethod
    def _cc_names(cls, v: list[str]) -> list[str]:
        for i, name in enumerate(v):
            if not _CC_NAME.match(name):
                raise ValueError(
                    f"[{i}]: {name!r} is not a congestion control name (cubic, reno, bbr, ...)"
                )
        return _unique(v)

    @field_validator("convergence_cap_s")
    @classmethod
    def _cap_before_window(cls, v: float | None, info: ValidationInfo) -> float | None:
        warmup = info.data.get("warmup_s")
        if v is not None and warmup is not None and v > warmup:
            raise ValueError(
                f"{v:g} s is after warmup_s {warmup:g} s (the window opens at warmup_s in "
                "every stack)"
            )
        return v

    def lab_stack(self, stack: str) -> str:
        """The lab's stack of one of the spec's stacks (its own variants included)."""
        return _lab_stack(stack, self.variants)

    def stack_set(self, stack: str) -> dict[str, str]:
        """The ``lab up --set`` a stack adds: a peer variant's profile, or a spec
        variant's ``set:`` over its stack's (booleans as ``true``/``false``)."""
        if stack in self.variants:
            var = self.variants[stack]
            return {**self.stack_set(var.stack), **{k: _as_set(x) for k, x in var.set.items()}}
        return stack_overrides(stack)

    def is_peer(self, stack: str) -> bool:
        return self.lab_stack(stack) in PEER_STACKS

    @property
    def cap_s(self) -> float:
        """Medium time at which the convergence wait gives up."""
        return self.warmup_s if self.convergence_cap_s is None else self.convergence_cap_s

    @field_validator("set")
    @classmethod
    def _not_matrix_keys(cls, v: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        for key in v:
            if key in ("stack", "proxy", "seed", "mobility.speed"):
                raise ValueError(f"{key}: is a matrix axis (stacks/proxies/seeds/speeds)")
        # A variant's setting would be overridden for it but not for the bare stack: the
        # two columns would not be what their names say.
        own = info.data.get("variants") or {}
        for stack in info.data.get("stacks") or []:
            keys = own[stack].set if stack in own else stack_overrides(stack)
            for key in keys:
                if key in v:
                    raise ValueError(
                        f"{key}: stack {stack} sets it; with {stack} in stacks the bare "
                        f"{_lab_stack(stack, own)} runs its default (leave {key} out)"
                    )
        return v

    @field_validator("proxies")
    @classmethod
    def _some_run(cls, v: list[str], info: ValidationInfo) -> list[str]:
        stacks = info.data.get("stacks") or []
        own = info.data.get("variants") or {}
        if (
            stacks
            and all(_lab_stack(s, own) in PEER_STACKS for s in stacks)
            and all(lab_proxy(p) in EVENT_PROXIES for p in v)
        ):
            raise ValueError(
                "elfn and bus need the route events the peer stacks (babeld, batmand) do "
                "not give: this matrix has no run (add plain or fixed-rto)"
            )
        return v

    @field_validator("traffics")
    @classmethod
    def _unique_names(
        cls, v: list[Bulk | Http | Wrk | Stream], info: ValidationInfo
    ) -> list[Bulk | Http | Wrk | Stream]:
        labels = [t.label() for t in v]
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise ValueError(f"names must be unique, {', '.join(dup)} repeats (set name:)")
        stacks = info.data.get("stacks") or []
        for i, t in enumerate(v):
            extra = [s for s in t.stacks or [] if s not in stacks]
            if stacks and extra:
                raise ValueError(
                    f"[{i}].stacks: {', '.join(extra)} not in the spec's stacks "
                    f"({', '.join(stacks)})"
                )
        return v

    def scenario_path(self, ref: str) -> Path:
        """A shipped scenario by name (``rwp-30``) or a YAML path relative to the spec."""
        if "/" not in ref and not ref.endswith((".yaml", ".yml")):
            return SHIPPED_SCENARIOS / f"{ref}.yaml"
        p = Path(ref)
        return p if p.is_absolute() else self.base_dir / p

    def resolve(self, ref: str) -> Path:
        """A path from the spec (``expected.chain``), relative to the spec's directory."""
        p = Path(ref)
        return p if p.is_absolute() else self.base_dir / p

    def traffic_duration(self, t: _Traffic) -> float:
        return t.duration_s if t.duration_s is not None else self.duration_s

    def runs(self) -> list[Run]:
        """Every run of the matrix, in the order they are made: repeat, seed, then speed
        outermost, so a partly done matrix already compares every stack at every speed
        for its first seeds (and has each seed once before any twice); a traffic with
        ``stacks:`` runs on those stacks only. A peer stack (babeld, batmand and their
        variants) is not run with an elfn or bus proxy: those act on the manetkit
        daemon's route events, which the peers do not give."""
        out = []
        ccs = self.congestion_control
        for scen in self.scenarios:
            for repeat in range(1, self.repeats + 1):
                for seed in self.seeds:
                    for speed in self.speeds:
                        for traffic in self.traffics:
                            for stack in self.stacks:
                                if traffic.stacks is not None and stack not in traffic.stacks:
                                    continue  # this traffic runs on some stacks only
                                for proxy in self.proxies:
                                    if self.is_peer(stack) and lab_proxy(proxy) in EVENT_PROXIES:
                                        continue  # no route events to act on
                                    for cc in ccs:
                                        out.append(Run(
                                            scen, stack, proxy, speed, seed, traffic.label(),
                                            repeat=repeat, cc=cc, lab_stack=self.lab_stack(stack),
                                            name_cc=len(ccs) > 1,
                                        ))  # fmt: skip
        return out

    def traffic(self, label: str) -> Bulk | Http | Wrk | Stream:
        return next(t for t in self.traffics if t.label() == label)


def _lab_stack(stack: str, own: dict[str, StackVariant]) -> str:
    return lab_stack(own[stack].stack) if stack in own else lab_stack(stack)


def _as_set(v: Any) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def _unique(v: list[Any]) -> list[Any]:
    seen = [x for i, x in enumerate(v) if x in v[:i]]
    if seen:
        raise ValueError(f"{seen[0]!r} is listed twice")
    return v


@dataclass(frozen=True)
class Run:
    """One run of the matrix; :attr:`name` names its JSON (``<name>.json``)."""

    scenario: str
    stack: str
    proxy: str
    speed: float
    seed: int
    traffic: str
    repeat: int = 1
    cc: str = DEFAULT_CC
    lab_stack: str = ""  # the lab's stack (a spec variant's, a peer variant's); "" = stack
    # whether the name carries the congestion control (a spec with several). The repeat
    # is named from the second on: the first repeat keeps a one-repeat spec's names, so
    # raising ``repeats`` resumes a results directory rather than starting it over.
    name_cc: bool = field(default=False, compare=False)

    @property
    def name(self) -> str:
        scen = Path(self.scenario).stem if "/" in self.scenario else self.scenario
        scen = scen.removesuffix(".yaml")
        name = f"{scen}_{self.stack}_{self.proxy}_v{self.speed:g}_s{self.seed}_{self.traffic}"
        if self.name_cc:
            name += f"_cc-{self.cc}"
        if self.repeat > 1:
            name += f"_r{self.repeat}"
        return name

    def params(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "stack": self.stack,
            "proxy": self.proxy,
            "speed": self.speed,
            "seed": self.seed,
            "traffic": self.traffic,
            "repeat": self.repeat,
            "cc": self.cc,
            "cc_axis": self.name_cc,
            "lab_stack": self.lab_stack or lab_stack(self.stack),
        }


# --- loading ---------------------------------------------------------------------------


def spec_from_dict(data: dict, source: str = "<spec>", base_dir: Path | None = None) -> Spec:
    """Validate a spec; then the checks that need its scenarios (field + reason)."""
    spec = validate(Spec, {**data, "base_dir": base_dir or Path(".")}, source, "experiment spec",
                    TRAFFIC_TAGS)  # fmt: skip
    problems: list[str] = []
    for i, ref in enumerate(spec.scenarios):
        path = spec.scenario_path(ref)
        if not path.is_file():
            problems.append(f"  scenarios[{i}]: {ref}: no such scenario ({path})")
            continue
        try:
            sc = load_scenario(path, {k: str(v) for k, v in spec.set.items()})
        except UserError as exc:
            problems.append(f"  scenarios[{i}]: {ref}: {exc}")
            continue
        problems += _check_against(spec, sc, f"scenarios[{i}] ({ref})")
    if spec.expected is not None and spec.expected.chain is not None:
        try:
            chain_table(spec.resolve(spec.expected.chain))
        except UserError as exc:
            problems.append(f"  expected.chain: {exc}")
    if problems:
        raise UserError(f"{source}: invalid experiment spec\n" + "\n".join(problems))
    return spec


def _check_against(spec: Spec, sc: Scenario, where: str) -> list[str]:
    out = []
    moving = isinstance(sc.mobility, RandomWaypointMobility)
    if not moving and any(s != 0 for s in spec.speeds):
        out.append(
            f"  speeds: {where} has {sc.mobility.model} mobility, no speed to set (use speeds: [0])"
        )
    names = set(sc.node_names)
    for i, t in enumerate(spec.traffics):
        for n in [*t.endpoints(), *t.background_endpoints(), *t.flap_endpoints()]:
            if n not in names:
                out.append(f"  traffics[{i}]: node {n!r} is not in {where} (n1..n{sc.nodes})")
        need = 0
        if isinstance(t, Bulk | Stream) and t.pairs is None:
            need = 2
        elif isinstance(t, Http) and t.pairs is None:
            need = t.clients + t.servers
        if need > sc.nodes:
            out.append(f"  traffics[{i}]: needs {need} distinct nodes, {where} has {sc.nodes}")
    return out


def load_spec(path: str | Path) -> Spec:
    """Read and validate an experiment spec file."""
    p = Path(path)
    return spec_from_dict(read_yaml_mapping(p, "experiment spec"), str(p), p.resolve().parent)


def check_stacks_built(spec: Spec) -> None:
    """Refuse, before anything runs, a stack the lab does not build (yet): the scenario
    model's own ``stack`` list is the truth (``lab up --stack``)."""
    built = get_args(Scenario.model_fields["stack"].annotation)
    missing = [s for s in spec.stacks if spec.lab_stack(s) not in built]
    if missing:
        raise UserError(
            f"stacks: {', '.join(missing)} not built in this checkout's lab "
            f"(lab up --stack takes {', '.join(built)})"
        )


def throughput_table(spec: Spec) -> dict[int, float] | None:
    """The spec's T_i (kbit/s by hop count), or None when it gives none."""
    if spec.expected is None:
        return None
    if spec.expected.table_kbps is not None:
        return dict(spec.expected.table_kbps)
    return chain_table(spec.resolve(spec.expected.chain or ""))


# --- who talks to whom -----------------------------------------------------------------


def bulk_pairs(t: Bulk, seed: int, nodes: int) -> list[Pair]:
    """The flows' (sender, receiver): given, or drawn from the run's seed (the same pairs
    for every stack and proxy at that seed). No node is in two flows while there are
    enough nodes; beyond that (25 flows among 30 nodes, Anantharaman et al. Table II)
    each flow is a random pair, never the same pair twice."""
    if t.pairs is not None:
        return list(t.pairs)
    rng = random.Random(f"bulk-{t.label()}-{seed}")
    if 2 * t.flows <= nodes:
        picked = rng.sample(range(1, nodes + 1), 2 * t.flows)
        return [(f"n{picked[2 * i]}", f"n{picked[2 * i + 1]}") for i in range(t.flows)]
    if t.flows > nodes * (nodes - 1):
        raise UserError(f"{t.label()}: {t.flows} flows need more than {nodes} nodes")
    out: list[Pair] = []
    while len(out) < t.flows:
        a, b = rng.sample(range(1, nodes + 1), 2)
        if (f"n{a}", f"n{b}") not in out:
            out.append((f"n{a}", f"n{b}"))
    return out


def http_pairs(t: Http, seed: int, nodes: int) -> list[Pair]:
    """(client, server) per client: given, or drawn from the run's seed; client i uses
    server i mod M (Dyer & Boppana: 10 clients, 3 servers)."""
    if t.pairs is not None:
        return list(t.pairs)
    rng = random.Random(f"http-{t.label()}-{seed}")
    picked = [f"n{k}" for k in rng.sample(range(1, nodes + 1), t.clients + t.servers)]
    servers, clients = picked[: t.servers], picked[t.servers :]
    return [(c, servers[i % t.servers]) for i, c in enumerate(clients)]


def background_pairs(t: _Traffic, seed: int, nodes: int) -> list[Pair]:
    """The CBR flows' (sender, receiver): given, or drawn from the run's seed (the same
    for every stack and proxy at that seed), each a random pair of distinct nodes
    (Dyer & Boppana pick them apart from the HTTP clients and servers only by chance)."""
    bg = t.background
    if bg is None:
        return []
    if bg.pairs is not None:
        return list(bg.pairs)
    rng = random.Random(f"cbr-{t.label()}-{seed}")
    out: list[Pair] = []
    for _ in range(bg.flows):
        a, b = rng.sample(range(1, nodes + 1), 2)
        out.append((f"n{a}", f"n{b}"))
    return out
