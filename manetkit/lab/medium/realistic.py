"""Sans-I/O 802.11 medium of the realistic profiles: reception decided on SINR.

Same contract as the ns2 MAC (:mod:`.mac`): inputs :meth:`RealisticMedium.transmit`,
:meth:`~RealisticMedium.handle_timer`, :meth:`~RealisticMedium.set_attached`,
:meth:`~RealisticMedium.set_overhear` with the time first; outputs
:class:`~.mac.Delivery` and :class:`~.mac.TxStatus` drained with
:meth:`~RealisticMedium.next_event`, each stamped with its virtual time; one timer.
Randomness comes from the seed (``random.Random`` for the MAC and the fading, a numpy
generator for the shadowing). The physics (docs/medium.md has the equations):

- Every PPDU (a broadcast, an RTS, a CTS, a data frame, an ACK) is a transmission of
  its own from the node that sends it, with a received power at every node that can
  hear it: the channel's mean power (``channel.py``: log-distance, correlated
  shadowing, per-node offsets) times a Nakagami gain held for the link's coherence time
  (``fading.py``).
- A receiver's PHY (IEEE 802.11-2020 clauses 16/17; ns-3 ``PhyEntity`` and
  ``ThresholdPreambleDetectionModel``): idle, it locks onto a frame whose power is at
  least ``preamble_min_rssi_dbm`` and whose SNR against the noise plus every other
  signal already on the air is at least ``preamble_min_snr_db``; everything else it
  hears is interference. Locked, it keeps the frame to its end; a later, stronger frame
  takes it over only with ``capture_threshold_db`` set (message-in-message capture; off
  by default, as ns-3.37). A node that transmits receives nothing (half duplex: a
  reception in progress is aborted).
- At a frame's end its survival probability is the product over its chunks of constant
  interference of the per-rate error model (``errormodels.py``: the PLCP header at the
  header rate, the payload at the frame's rate), with SINR = P / (noise + the sum of
  every other signal present), and one draw decides.
- Carrier sense (CCA): a node is busy while it is locked onto a frame (preamble
  detection) or while a signal at least ``cca_ed_threshold_dbm`` is on the air (energy
  detection), and under its NAV. A decoded RTS or CTS of another exchange sets the NAV
  to the exchange's end; a data frame of another exchange defers to the end of its ACK
  (its NAV when decoded, EIFS when not: the same instant); a broadcast, RTS or CTS that
  could not be decoded defers by EIFS - DIFS (SIFS + ACK). The backoff counts down only
  while idle (frozen and resumed after AIFS, as the ns2 MAC does).
- Same-slot collisions: a contender whose backoff ends less than one slot after
  another transmission began has not sensed it yet (the slot is defined as the time to
  notice a transmission, 802.11-2020 10.3.7): it transmits too, and both frames meet at
  the receivers as interference.
- Exchanges: a broadcast or multicast goes once at the basic rate (or the profile's
  multicast rate, as mac80211 sends an IBSS's group frames at its ``mcast-rate``), no
  ACK. A unicast is
  [RTS, SIFS, CTS, SIFS,] data, SIFS, ACK, every response SIFS after the frame it
  answers and subject to the same physics, RTS/CTS/ACK at the basic rate and the data at
  the attempt's rate from the rate controller's retry chain (``ratecontrol.py``: fixed
  or Minstrel). A missing response ends the attempt after the response timeout
  (SIFS + slot + the PHY's preamble and header: 802.11-2020 10.3.2.11), a corrupted one
  at its end; the CW doubles and the frame is retried up to ``retry_limit`` times, then
  a tx-failure status. The destination passes a frame up once however often it is
  retried (802.11 duplicate detection); an ACK lost after a delivered frame makes the
  sender retry (and, after the limit, report a failure of a frame that arrived: real
  link-layer feedback does that).
- Queues: one per access category (``queues.py``, WMM): the highest non-empty category
  is served first, with its own AIFS and CW; each keeps its retry state. ``wmm: false``
  gives every category DCF's parameters and one FIFO in effect.
- A delivery carries the frame's received power rounded to 1 dB (what nl80211 reports).
- Overhearing (``set_overhear``): a promiscuous node that decodes a unicast the
  destination also decoded gets it once, as in the ns2 MAC.

What it does not model: MIMO and 802.11n/ac aggregation, TXOP bursts, the PLCP's exact
LENGTH rounding, separate short and long retry counts, internal EDCA contention between
a node's own categories (strict priority instead), EIFS after a corrupted ACK, adjacent
channels. docs/medium.md lists the rest.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from heapq import heappop, heappush

from manetkit.lab.medium.airtime import (
    ACK_BYTES,
    CTS_BYTES,
    DSSS,
    OFDM,
    RTS_BYTES,
    RTS_OFF,
    mpdu_bytes,
    ppdu_us,
)
from manetkit.lab.medium.channel import Channel, LinkBudget, usable_distance_m
from manetkit.lab.medium.errormodels import (
    GRID_PER_DB,
    GRID_START,
    MAX_SINR_DB,
    MIN_SINR_DB,
    BitErrorTable,
    frame_layout,
)
from manetkit.lab.medium.fading import CLARKE_COHERENCE, NakagamiFading
from manetkit.lab.medium.fqcodel import CodelParams, DropTailQueue, FqCodelQueue, TxQueue
from manetkit.lab.medium.linktable import realistic_link_table
from manetkit.lab.medium.macbase import CONTEND, COUNTERS, IDLE, TX, Delivery, MacBase, TxStatus
from manetkit.lab.medium.mobility import World
from manetkit.lab.medium.pathloss import SPEED_OF_LIGHT
from manetkit.lab.medium.power import db_to_ratio, dbm_to_w
from manetkit.lab.medium.profiles import PhyProfile
from manetkit.lab.medium.protocol import mac_node
from manetkit.lab.medium.queues import AC_BE, access_category, dcf_only, edca_defaults
from manetkit.lab.medium.ratecontrol import FixedRate, Minstrel

# heap event kinds; at equal times: ends, then responses, then timeouts, then starts
_END, _RESPOND, _TIMEOUT, _START = 0, 1, 2, 3
# PPDU kinds
BCAST, RTS, CTS, DATA, ACK = 0, 1, 2, 3, 4
_NOBODY = -2
_ACS = (3, 2, 1, 0)  # service order: VO, VI, BE, BK


def _rssi(watts: float) -> float:
    """Received power in whole dBm, nl80211's resolution."""
    return float(round(10.0 * math.log10(watts * 1000.0)))


def _randbelow(getrandbits: Callable[[int], int], n: int) -> int:
    """Uniform in 0..n-1: ``random.randint(0, n - 1)``'s own draws (CPython's
    ``Random._randbelow_with_getrandbits``: rejection sampling on ``n.bit_length()``
    bits), without randint's and randrange's argument checks on every backoff."""
    k = n.bit_length()
    r = getrandbits(k)
    while r >= n:
        r = getrandbits(k)
    return r


def _chunk_lp(p: _Ppdu, a: float, t: float, sinr_db: float) -> float:
    """The log success of the bits of ``p`` sent between ``a`` and ``t`` at ``sinr_db``:
    the PLCP header's at the header mode, the payload's at the frame's rate (ns-3
    ``InterferenceHelper::CalculatePhyHeaderSectionPsr`` / ``CalculatePayloadPer``).

    :meth:`BitErrorTable.lpb_db` inlined on the grids the layout holds: this runs for
    every receiver of every transmission, and the SINR is the same for both sections.
    """
    _, h0, h1, hgrid, hbps, pgrid, pbps = p.lay
    start = p.start
    h0 += start
    h1 += start
    lp = 0.0
    end = p.end
    # min() and max() of two floats, without the builtins' call overhead
    ov_header = (t if t <= h1 else h1) - (a if a >= h0 else h0)
    ov_payload = (t if t <= end else end) - (a if a >= h1 else h1)
    if sinr_db <= MIN_SINR_DB:
        hl = pl = -math.inf
    elif sinr_db >= MAX_SINR_DB:
        hl = pl = 0.0
    else:
        k = round(sinr_db * GRID_PER_DB) - GRID_START
        hl, pl = hgrid[k], pgrid[k]
    if ov_header > 0:
        lp += ov_header * hbps * hl
    if ov_payload > 0:
        lp += ov_payload * pbps * pl
    return lp


class _Ppdu:
    """One transmission on the air and where each section of it lies (seconds)."""

    __slots__ = (
        "src",
        "kind",
        "xchg",
        "start",
        "end",
        "lay",
        "pw",
        "locked_rx",
    )

    def __init__(self, src: int, kind: int, xchg: _Exchange, start: float, end: float, lay: tuple):
        self.src = src
        self.kind = kind
        self.xchg = xchg
        self.start = start
        self.end = end
        self.lay = lay  # RealisticMedium._layout's tuple (_chunk_lp reads it)
        self.pw: list[float] = []  # received power at every node (0: out of earshot)
        self.locked_rx: list[int] = []  # nodes that locked onto it (some may have left)


class _Exchange:
    """One frame of one node: its attempts (unicast) or its one transmission (broadcast)."""

    __slots__ = (
        "src",
        "dst",
        "frame",
        "ac",
        "mpdu",
        "chain",
        "attempt",
        "rate",
        "rts",
        "delivered",
        "overheard",
        "data_s",
        "stage",
    )

    def __init__(self, src: int, dst: int, frame: bytes, ac: int):
        self.src = src
        self.dst = dst  # 0-based node, -1 broadcast, _NOBODY: no lab radio
        self.frame = frame
        self.ac = ac
        self.mpdu = mpdu_bytes(len(frame))
        self.chain: tuple[float, ...] = ()
        self.attempt = 0
        self.rate = 0.0
        self.rts = False
        self.delivered = False
        self.overheard: set[int] | None = None
        self.data_s = 0.0
        self.stage = DATA  # the kind of the exchange's next PPDU


class _Node:
    __slots__ = (
        "queues",
        "pending",
        "cw",
        "state",
        "ac",
        "backoff",
        "count_from",
        "start_at",
        "gen",
        "busy_until",
        "nav_until",
        "tx_until",
        "attached",
        "overhear",
        "drops",
        "sent",
        "received",
        "busy_s",
        "locked",
        "lock_pw",
        "lock_t",
        "lock_lp",
        "lock_hit",
        "index",
    )

    def __init__(self, index: int, queues: list[TxQueue]) -> None:
        self.index = index
        self.queues = queues  # one per access category
        self.pending: list[_Exchange | None] = [None, None, None, None]
        self.cw = [0, 0, 0, 0]
        self.state = IDLE
        self.ac = AC_BE
        self.backoff = 0
        self.count_from = 0.0
        self.start_at = 0.0
        self.gen = 0
        self.busy_until = 0.0  # CCA (physical, NAV, EIFS) busy until
        self.nav_until = 0.0
        self.tx_until = -1.0  # own transmission on the air until
        self.attached = True
        self.overhear = False
        self.drops = 0
        self.sent = 0
        self.received = 0
        self.busy_s = 0.0
        # PHY: the frame it is receiving (valid while that frame is on the air), its power,
        # the end of its last closed chunk and the chunks' summed log success
        self.locked: _Ppdu | None = None
        self.lock_pw = 0.0
        self.lock_t = 0.0
        self.lock_lp = 0.0
        self.lock_hit = False  # interference during the locked frame


# What _send needs of one listener r of a sender i, fixed for a snapshot: r, its node,
# the mean power it receives i at and its noise (W), the pair's index in the held fades,
# and whether the link i->r is forced down (no reception; carrier sense still).
_Listener = tuple[int, _Node, float, float, int, bool]


class RealisticMedium(MacBase[LinkBudget, _Node]):
    """The shared channel of one lab under a realistic profile (module docstring)."""

    MODELLED_DROPS = (
        "queue_drops", "random_losses", "interference_losses", "phy_losses", "codel_drops"
    )  # fmt: skip

    def __init__(
        self,
        world: World,
        profile: PhyProfile,
        *,
        queue_frames: int = 50,
        retry_limit: int = 7,
        rts_threshold: int = RTS_OFF,
        short_preamble: bool = False,
        loss: float = 0.0,
        link_loss: dict[tuple[int, int], float] | None = None,
        seed: int = 1,
        refresh_s: float = 0.05,
        airtime_scale: float = 1.0,
        overhear: bool = True,
        queue: str = "droptail",
        codel: CodelParams | None = None,
    ):
        if not airtime_scale > 0:
            raise ValueError("airtime_scale must be > 0")
        super().__init__(
            world,
            random.Random(f"manetkit-realistic:{seed}"),
            queue_frames=queue_frames,
            retry_limit=retry_limit,
            loss=loss,
            link_loss=link_loss,
            refresh_s=refresh_s,
            overhear=overhear,
        )
        n = self.n
        self.profile = profile
        self.rts_threshold = rts_threshold
        self.short_preamble = short_preamble
        self._getrandbits = self.rng.getrandbits  # _contend's backoff draws
        self.fading = NakagamiFading(
            profile.nakagami_m or None, random.Random(f"manetkit-fading:{seed}")
        )
        self.channel = Channel(profile, world, seed, step_s=refresh_s)
        self.table: BitErrorTable = self.channel.table
        # Tabulate every rate this medium can use now, not when a frame needs it.
        headers = (1.0, 2.0) if profile.standard == "802.11b" else (6.0,)
        self.table.warm({*profile.rates, *headers})

        self._us = us = 1e-6 * airtime_scale
        phy = DSSS if profile.standard == "802.11b" else OFDM
        self.phy = phy
        self.slot = phy.slot_us * us
        self.sifs = phy.sifs_us * us
        params = edca_defaults(phy) if profile.wmm else dcf_only(phy)
        self.aifs = [p.aifs_us(phy) * us for p in params]
        self.cw_min = [p.cw_min for p in params]
        self.cw_max = [p.cw_max for p in params]
        self.wmm = profile.wmm
        self.basic = profile.basic_rate_mbps
        self.bcast_rate = profile.broadcast_rate_mbps  # mcast-rate, when set
        plcp = ppdu_us(0, self.basic, short_preamble)
        self.timeout = (phy.sifs_us + phy.slot_us + plcp) * us
        self._ack = self._ppdu_s(ACK_BYTES, self.basic)
        self._cts = self._ppdu_s(CTS_BYTES, self.basic)
        self._rts = self._ppdu_s(RTS_BYTES, self.basic)
        attempts = retry_limit + 1
        # One controller per transmitter (mac80211 keeps rate statistics per station):
        # a relay's ACKs towards the source learn nothing from its data towards the sink.
        self.rates: list[FixedRate | Minstrel]
        if profile.rate_control == "minstrel":
            self.rates = [
                Minstrel(
                    profile.rates,
                    attempts,
                    self._reference_attempt_us,
                    random.Random(f"manetkit-minstrel:{seed}:{k}"),
                )
                for k in range(n)
            ]
        else:
            self.rates = [FixedRate(profile.rate_mbps, attempts) for _ in range(n)]

        # thresholds in watts / ratios
        self.detect_w = dbm_to_w(profile.preamble_min_rssi_dbm)
        self.detect_snr = db_to_ratio(profile.preamble_min_snr_db)
        self.ed_w = dbm_to_w(profile.cca_ed_threshold_dbm)
        self.capture = (
            db_to_ratio(profile.capture_threshold_db)
            if profile.capture_threshold_db is not None
            else 0.0
        )
        self._fading_on = profile.nakagami_m is not None and profile.nakagami_m > 0
        self._coh_k = CLARKE_COHERENCE * SPEED_OF_LIGHT / profile.frequency_hz
        self._layouts: dict[tuple[int, float], tuple] = {}
        # The fade each pair holds (index i * n + j, i < j): until when, and its gain.
        # Lists, not NakagamiFading's dict: _send reads them for every listener.
        self._fade_until = [-math.inf] * (n * n)
        self._fade_gain = [1.0] * (n * n)

        if queue == "fq_codel":
            cp = codel or CodelParams()

            def make() -> TxQueue:
                return FqCodelQueue(cp)
        elif queue == "droptail":

            def make() -> TxQueue:
                return DropTailQueue(queue_frames)
        else:
            raise ValueError(f"unknown queue {queue!r} (droptail, fq_codel)")
        self.nodes = [_Node(k, [make() for _ in range(4)]) for k in range(n)]
        for nd in self.nodes:
            nd.cw = list(self.cw_min)
        self._air: list[_Ppdu] = []  # transmissions on the air now
        self._ppdus = 0
        self._airtime = 0.0
        self._counters = {
            **dict.fromkeys(COUNTERS, 0),
            "phy_losses": 0,
            "aborted": 0,
            "captured": 0,
            "acks_lost": 0,
            "overheard": 0,
            "codel_drops": 0,
        }
        self.snapshot = self._snap(0.0)
        self._snap_version = world.version

    # --- timings ----------------------------------------------------------------------

    def _ppdu_s(self, mpdu: int, rate: float) -> float:
        return ppdu_us(mpdu, rate, self.short_preamble) * self._us

    def _reference_attempt_us(self, rate: float) -> float:
        phy = self.phy
        return (
            phy.difs_us
            + phy.cw_min / 2 * phy.slot_us
            + ppdu_us(1200 + 36, rate, self.short_preamble)
            + phy.sifs_us
            + ppdu_us(ACK_BYTES, self.basic, self.short_preamble)
        )

    def _layout(self, mpdu: int, rate: float) -> tuple:
        """(duration, header start, header end, header mode's grid, header bits/s,
        payload mode's grid, payload bits/s) of a PPDU, seconds from its start; bits
        counted on the unscaled 802.11 time so ``airtime_scale`` does not change the
        physics. A grid is the mode's log success per bit on :class:`BitErrorTable`'s
        SINR grid (``_chunk_lp`` looks it up)."""
        key = (mpdu, rate)
        lay = self._layouts.get(key)
        if lay is None:
            fl = frame_layout(mpdu, rate, self.short_preamble)
            us = self._us
            lay = self._layouts[key] = (
                fl.end_us * us,
                fl.header_start_us * us,
                fl.header_end_us * us,
                self.table.grid(fl.header_mode),
                fl.header_bits_per_us / us,
                self.table.grid(fl.payload_mode),
                fl.payload_bits_per_us / us,
            )
        return lay

    # --- what the shared inputs ask of this MAC (macbase.py) -------------------------

    def _snap(self, t: float) -> LinkBudget:
        self._mobile = self.world.mobile  # _send's inlined refresh test reads it
        # each sender's listeners under this snapshot, built on its first transmission
        self._rows: list[list[_Listener] | None] = [None] * self.n
        return self.channel.snapshot(t)

    def _listeners(self, i: int) -> list[_Listener]:
        """Node ``i``'s listeners under the current snapshot (cached in ``_rows``)."""
        snap = self.snapshot
        n = self.n
        mean = snap.mean_w[i]
        noise = snap.noise_w
        blocked = snap.blocked
        nodes = self.nodes
        rows = self._rows[i] = [
            (
                r,
                nodes[r],
                mean[r],
                noise[r],
                i * n + r if i < r else r * n + i,
                i * n + r in blocked,
            )
            for r in snap.audible[i]
        ]
        return rows

    def _drop_queued(self, nd: _Node) -> None:
        for ac in range(4):
            nd.queues[ac].clear(nd.pending[ac] is not None)
        if nd.state == CONTEND and not nd.queues[nd.ac]:
            nd.state = IDLE  # nothing left to contend for
            nd.gen += 1  # its scheduled start is void

    def _enqueue(self, nd: _Node, frame: bytes, now: float) -> bool:
        """One queue per access category (WMM), or AC_BE's alone: drop-tail, or
        FQ-CoDel (``fqcodel.py``), whose limit drops from the longest flow instead."""
        q = nd.queues[access_category(frame) if self.wmm else AC_BE]
        before = q.overlimit_drops
        if not q.push(frame, now):
            return False
        if q.overlimit_drops != before:
            nd.drops += 1
            self._counters["queue_drops"] += 1
        return True

    def handle_timer(self, now: float) -> None:
        heap = self._heap
        nodes = self.nodes
        while heap and heap[0][0] <= now:
            t, kind, _, i, gen, obj = heappop(heap)
            if kind == _START:  # the commonest: most are void (a newer start replaced them)
                if gen == nodes[i].gen:
                    self._start(i, t)
            elif kind == _END:
                self._end(obj, t)
            elif kind == _RESPOND:
                self._respond(i, obj, t)
            elif nodes[i].pending[obj.ac] is obj and obj.attempt == gen:
                self._failed(i, obj, t)  # a response timeout of the current attempt

    def get_timer(self) -> float | None:
        heap = self._heap
        nodes = self.nodes
        while heap:
            top = heap[0]
            if top[1] != _START or top[4] == nodes[top[3]].gen:
                return top[0]
            heappop(heap)  # a void start
        return None

    # --- contention -------------------------------------------------------------------

    def _push(self, t: float, kind: int, i: int, gen: int = 0, obj: object = None) -> None:
        self._seq += 1
        heappush(self._heap, (t, kind, self._seq, i, gen, obj))

    def _contend(self, i: int, t: float) -> None:
        nd = self.nodes[i]
        queues = nd.queues
        for ac in _ACS:
            if queues[ac]:
                break
        else:
            nd.state = IDLE
            return
        nd.state = CONTEND
        nd.ac = ac
        nd.backoff = b = _randbelow(self._getrandbits, nd.cw[ac] + 1)
        busy = nd.busy_until
        nd.count_from = (t if t >= busy else busy) + self.aifs[ac]
        nd.start_at = nd.count_from + b * self.slot
        nd.gen += 1
        self._push(nd.start_at, _START, i, nd.gen)

    def _defer(self, j: int, t: float, until: float, own: bool = False) -> None:
        """Node ``j``'s medium is busy from ``t`` until ``until``: freeze its countdown,
        unless its backoff ends within this slot and the busy medium is another node's
        transmission (it cannot have noticed yet: a same-slot collision)."""
        m = self.nodes[j]
        if until <= m.busy_until:
            return
        m.busy_until = until
        if m.state != CONTEND or (not own and m.start_at - t < self.slot):
            return
        slot = self.slot
        if t > m.count_from:
            m.backoff = max(0, m.backoff - int((t - m.count_from) / slot + 1e-6))
        m.count_from = until + self.aifs[m.ac]
        m.start_at = m.count_from + m.backoff * slot
        m.gen += 1
        self._push(m.start_at, _START, j, m.gen)

    # --- exchanges --------------------------------------------------------------------

    def _start(self, i: int, t: float) -> None:
        """Node ``i`` won the contention: the next attempt of its head frame."""
        nd = self.nodes[i]
        ac = nd.ac
        x = nd.pending[ac]
        if x is None:
            q = nd.queues[ac]
            before = q.codel_drops
            frame = q.head(t)
            if q.codel_drops != before:  # CoDel dropped at the head on the way
                self._counters["codel_drops"] += q.codel_drops - before
            if frame is None:  # it dropped all there was: the next category, if any
                self._contend(i, t)
                return
            if frame[0] & 1:
                dst = -1
            else:
                d = mac_node(frame[:6])
                dst = d - 1 if d is not None and 1 <= d <= self.n else _NOBODY
            x = nd.pending[ac] = _Exchange(i, dst, frame, ac)
            if dst != -1:
                x.chain = self.rates[i].chain(t, dst)
                x.rts = x.mpdu > self.rts_threshold
        nd.state = TX
        self._counters["transmissions"] += 1
        if x.dst == -1:
            self._send(i, BCAST, x, t, x.mpdu, self.bcast_rate)
            return
        x.rate = x.chain[x.attempt]
        x.data_s = self._layout(x.mpdu, x.rate)[0]
        if x.rts:
            x.stage = RTS
            self._send(i, RTS, x, t, RTS_BYTES, self.basic)
        else:
            x.stage = DATA
            self._send(i, DATA, x, t, x.mpdu, x.rate)

    def _respond(self, i: int, x: _Exchange, t: float) -> None:
        """The next frame of an exchange, SIFS after the one it answers: the destination's
        CTS or ACK, or the sender's data frame after a CTS."""
        kind = x.stage
        if kind == DATA:
            self._send(i, DATA, x, t, x.mpdu, x.rate)
        elif self.nodes[i].tx_until > t:  # transmitting: it cannot answer
            self._push(t - self.sifs + self.timeout, _TIMEOUT, x.src, x.attempt, x)
        elif kind == CTS:
            self._send(i, CTS, x, t, CTS_BYTES, self.basic)
        else:
            self._send(i, ACK, x, t, ACK_BYTES, self.basic)

    def _send(self, i: int, kind: int, x: _Exchange, t: float, mpdu: int, rate: float) -> None:
        """Put one PPDU on the air from node ``i``: its power at every listener (the mean
        power times the held fade), who locks onto it, and whose CCA it makes busy.

        The hot loop of the realistic MAC (every listener of every transmission): what
        the snapshot fixes comes from ``_listeners``' rows, and everything read per
        listener is a local."""
        lay = self._layout(mpdu, rate)
        dur = lay[0]
        end = t + dur
        p = _Ppdu(i, kind, x, t, end, lay)
        nd = self.nodes[i]
        c = self._counters
        self._ppdus += 1
        self._airtime += dur
        nd.busy_s += dur
        if nd.locked is not None and nd.locked.end > t:  # half duplex: its reception is lost
            c["aborted"] += 1
        nd.locked = None
        nd.tx_until = end
        if end > nd.busy_until:  # _defer's own test, saving the call when it returns at once
            self._defer(i, t, end, own=True)
        snap = self.snapshot
        if self.world.version != self._snap_version or (
            self._mobile and t - snap.t >= self.refresh_s
        ):
            snap = self.refresh(t)
        rows = self._rows[i]
        if rows is None:
            rows = self._listeners(i)
        fading = self._fading_on
        if fading:
            fade_until, fade_gain = self._fade_until, self._fade_gain
            draw = self.fading.draw
            coh = self.profile.coherence_time_s
            vmin = self.profile.fading_min_speed_mps
            k = self._coh_k
            speed = snap.speed
            vi = speed[i]
        detect_w, detect_snr, ed_w = self.detect_w, self.detect_snr, self.ed_w
        capture = self.capture
        # Listeners that lock onto a data frame defer to its ACK's end at once: its NAV
        # when they decode it, EIFS when they do not (the same instant).
        hold = end + self.sifs + self._ack if kind == DATA else end
        slot, aifs = self.slot, self.aifs
        pw = p.pw = [0.0] * self.n
        locked_rx = p.locked_rx
        air = self._air
        chunk = self._chunk
        heap = self._heap
        seq = self._seq
        quiet = not air  # the common case: a frame sent on an idle medium
        for r, m, pr, noise, key, blocked in rows:
            if fading:
                if t >= fade_until[key]:  # the pair's fade is older than its coherence time
                    fade_gain[key] = draw()
                    fade_until[key] = t + (coh if coh is not None else k / max(vi + speed[r], vmin))
                pr *= fade_gain[key]
            pw[r] = pr
            until = end if pr >= ed_w else 0.0
            if quiet:
                # Nothing else on the air, so no listener is receiving: a lock it still
                # holds is on a frame that has ended (void, cleared by the next busy
                # send), and the SNR is against the noise alone.
                if (
                    pr >= detect_w
                    and m.tx_until <= t
                    and m.attached
                    and pr >= detect_snr * noise
                    and not blocked
                ):
                    m.locked = p  # (one store each: a 5-tuple assignment builds a tuple)
                    m.lock_pw = pr
                    m.lock_t = t
                    m.lock_lp = 0.0
                    m.lock_hit = False
                    locked_rx.append(r)
                    until = hold
            else:
                lk = m.locked
                if lk is not None and lk.end <= t:
                    lk = m.locked = None  # that frame has ended
                if lk is not None:
                    chunk(m, lk, t, noise)  # the interference is about to change
                    if (
                        capture
                        and pr >= capture * m.lock_pw
                        and pr >= detect_w
                        and m.tx_until <= t
                        and not blocked
                    ):
                        c["captured"] += 1
                        m.locked, m.lock_pw, m.lock_t, m.lock_lp, m.lock_hit = p, pr, t, 0.0, True
                        locked_rx.append(r)
                        until = hold
                elif pr >= detect_w and m.tx_until <= t and m.attached:
                    other = 0.0
                    for q in air:
                        other += q.pw[r]
                    if pr >= detect_snr * (noise + other) and not blocked:
                        m.locked, m.lock_pw, m.lock_t, m.lock_lp = p, pr, t, 0.0
                        m.lock_hit = other > 1e-3 * noise
                        locked_rx.append(r)
                        until = hold
            if until > m.busy_until:  # CCA busy: freeze its countdown (see _defer)
                m.busy_until = until
                if m.state == CONTEND and m.start_at - t >= slot:
                    # _defer, inlined: every contender in earshot comes here once per frame
                    b = m.backoff
                    cf = m.count_from
                    if t > cf:
                        b -= int((t - cf) / slot + 1e-6)
                        if b < 0:
                            b = 0
                        m.backoff = b
                    m.count_from = cf = until + aifs[m.ac]
                    m.start_at = start = cf + b * slot
                    m.gen = gen = m.gen + 1
                    seq += 1  # self._push, inlined
                    heappush(heap, (start, _START, seq, r, gen, None))
        self._seq = seq + 1  # and self._push of the end
        heappush(heap, (end, _END, seq + 1, i, 0, p))
        air.append(p)

    def _chunk(self, m: _Node, p: _Ppdu, t: float, noise_w: float) -> None:
        """Close the chunk of ``m``'s locked frame ``p`` up to ``t`` (the interference is
        about to change): add its bits' log success at the chunk's SINR, the interference
        being every other transmission on the air at ``m``."""
        a = m.lock_t
        if t <= a:
            return
        r = m.index
        interference = 0.0
        for q in self._air:
            if q is not p:
                interference += q.pw[r]
        if interference > 1e-3 * noise_w:
            m.lock_hit = True
        m.lock_lp += _chunk_lp(p, a, t, 10.0 * math.log10(m.lock_pw / (noise_w + interference)))
        m.lock_t = t

    def _decoded(self, m: _Node) -> bool:
        lp = m.lock_lp
        if lp == 0.0:
            return True
        if lp < -745.0:
            return False
        return self.rng.random() < math.exp(lp)

    def _end(self, p: _Ppdu, t: float) -> None:
        """A PPDU ends: each receiver locked onto it decodes it or not; the exchange goes on."""
        nodes = self.nodes
        noise = self.snapshot.noise_w
        c = self._counters
        decoded: list[tuple[int, float]] = []
        failed: list[int] = []
        kind = p.kind
        x = p.xchg
        # Whose decoding matters: everyone's for broadcasts, RTS and CTS (deliveries,
        # NAV); the addressee's and the overhearers' for data (every other listener
        # defers to the ACK's end either way); the sender's alone for an ACK.
        target = x.dst if kind in (DATA, RTS) else x.src if kind != BCAST else -3
        if kind == DATA:
            only, listeners = target, self._overhearers
        elif kind == ACK:
            only, listeners = target, 0
        else:
            only, listeners = -3, 1
        chunk = self._chunk
        decide = self._decoded
        air = self._air
        pw = p.pw
        alone = len(air) == 1  # nothing else on the air: the SINR is the SNR
        if not alone:  # receivers of other frames that hear this one: their SINR changes
            for q in air:
                if q is not p:
                    for r in q.locked_rx:
                        m = nodes[r]
                        if m.locked is q and pw[r] > 0.0:
                            chunk(m, q, t, noise[r])
        # A lock on an ended frame is void (``locked.end <= t``): only the receivers
        # whose decoding matters are visited.
        evaluate = p.locked_rx if listeners else ((only,) if only >= 0 and pw[only] > 0 else ())
        for r in evaluate:
            m = nodes[r]
            if m.locked is not p:
                continue  # it left for a stronger frame, or transmitted
            m.locked = None
            if r == only or only == -3 or m.overhear:
                if not alone:
                    chunk(m, p, t, noise[r])
                elif t > m.lock_t:  # _chunk without interference
                    sinr_db = 10.0 * math.log10(m.lock_pw / noise[r])
                    m.lock_lp += _chunk_lp(p, m.lock_t, t, sinr_db)
                    m.lock_t = t
                if decide(m):
                    decoded.append((r, pw[r]))
                else:
                    failed.append(r)
                    if r == target or kind == BCAST:
                        c["interference_losses" if m.lock_hit else "phy_losses"] += 1
        air.remove(p)
        if failed and kind != ACK and kind != DATA:  # data: deferred at its start
            until = t + self.sifs + self._ack  # EIFS - DIFS
            for r in failed:
                self._defer(r, t, until)
        if kind == BCAST:
            self._broadcast_end(p, x, t, decoded)
        elif kind == DATA:
            self._data_end(p, x, t, decoded)
        elif kind == RTS:
            ok = False
            nav = t + 3 * self.sifs + self._cts + x.data_s + self._ack
            for r, _ in decoded:
                if r == x.dst:
                    ok = True
                else:
                    self._nav(r, t, nav)
            dst = nodes[x.dst] if ok else None
            if dst is not None and dst.nav_until <= t:  # 802.11 answers RTS only if NAV idle
                x.stage = CTS
                self._push(t + self.sifs, _RESPOND, x.dst, 0, x)
            else:
                self._push(t + self.timeout, _TIMEOUT, x.src, x.attempt, x)
        elif kind == CTS:
            ok = False
            nav = t + 2 * self.sifs + x.data_s + self._ack
            for r, _ in decoded:
                if r == x.src:
                    ok = True
                else:
                    self._nav(r, t, nav)
            if ok:
                x.stage = DATA
                self._push(t + self.sifs, _RESPOND, x.src, 0, x)
            else:
                self._failed(x.src, x, t)
        else:  # ACK: only its addressee, the sender, was evaluated
            if decoded:
                self._succeeded(x.src, x, t)
            else:
                c["acks_lost"] += 1
                self._failed(x.src, x, t)

    def _broadcast_end(
        self, p: _Ppdu, x: _Exchange, t: float, decoded: list[tuple[int, float]]
    ) -> None:
        c = self._counters
        c["broadcast"] += 1
        i, frame, nodes = x.src, x.frame, self.nodes
        for r, pr in decoded:
            if self._lossy(i, r):
                c["random_losses"] += 1
                continue
            self._events.append(Delivery(t, r + 1, _rssi(pr), frame))
            nodes[r].received += 1
            c["delivered"] += 1
        self._done(i, x.ac, t)

    def _data_end(self, p: _Ppdu, x: _Exchange, t: float, decoded: list[tuple[int, float]]) -> None:
        nodes = self.nodes
        c = self._counters
        dst, i = x.dst, x.src
        got = None
        for r, pr in decoded:  # listeners deferred to the ACK's end when they locked on
            if r == dst:
                got = pr
        if got is not None and self._lossy(i, dst):
            c["random_losses"] += 1
            got = None
        if got is None:
            self._push(t + self.timeout, _TIMEOUT, i, x.attempt, x)
            return
        if not x.delivered:  # duplicate detection: a retried frame is passed up once
            x.delivered = True
            self._events.append(Delivery(t, dst + 1, _rssi(got), x.frame))
            nodes[dst].received += 1
            c["delivered"] += 1
        if self._overhearers:
            for r, pr in decoded:
                m = nodes[r]
                if r == dst or not m.overhear:
                    continue
                if x.overheard is None:
                    x.overheard = set()
                if r not in x.overheard:
                    x.overheard.add(r)
                    self._events.append(Delivery(t, r + 1, _rssi(pr), x.frame))
                    c["overheard"] += 1
        x.stage = ACK
        self._push(t + self.sifs, _RESPOND, dst, 0, x)

    def _nav(self, r: int, t: float, until: float) -> None:
        m = self.nodes[r]
        if until > m.nav_until:
            m.nav_until = until
        self._defer(r, t, until)

    def _succeeded(self, i: int, x: _Exchange, t: float) -> None:
        nd = self.nodes[i]
        self.rates[i].attempted(t, x.dst, x.rate, True)
        self._counters["unicast_ok"] += 1
        if x.attempt:
            self._events.append(TxStatus(t, i + 1, x.frame[:6], x.attempt, True, b""))
        nd.cw[x.ac] = self.cw_min[x.ac]
        self._done(i, x.ac, t)

    def _failed(self, i: int, x: _Exchange, t: float) -> None:
        """The attempt got no (decodable) response: retry or give up."""
        nd = self.nodes[i]
        self.rates[i].attempted(t, x.dst, x.rate, False)
        c = self._counters
        if x.attempt >= self.retry_limit:
            c["unicast_failed"] += 1
            self._events.append(TxStatus(t, i + 1, x.frame[:6], x.attempt, False, x.frame))
            nd.cw[x.ac] = self.cw_min[x.ac]
            self._done(i, x.ac, t)
            return
        x.attempt += 1
        c["retries"] += 1
        nd.cw[x.ac] = min(2 * nd.cw[x.ac] + 1, self.cw_max[x.ac])
        self._contend(i, t)

    def _done(self, i: int, ac: int, t: float) -> None:
        nd = self.nodes[i]
        nd.pending[ac] = None
        nd.queues[ac].pop()
        nd.sent += 1
        self._contend(i, t)

    # --- introspection --------------------------------------------------------------

    def queue_length(self, node: int) -> int:
        return sum(len(q) for q in self.nodes[node - 1].queues)

    def link_rule(self) -> str:
        """The ground truth's notion of a usable link, in words (``channel.py``)."""
        return self.channel.link_rule()

    def link_table(self, t: float, cs: bool = False) -> dict:
        """Every usable link at once (the control command ``links``, ``linktable.py``)."""
        p = self.profile
        pl = self.channel.pathloss
        floor = float(self.channel.noise_dbm.min())
        budget = p.tx_power_dbm + 2 * p.antenna_gain_dbi
        ranges = {
            "rx_m": round(usable_distance_m(p), 1),
            "cs_m": round(pl.distance_for_loss(budget - p.preamble_min_rssi_dbm), 1),
            "rx_threshold_dbm": round(floor + self.channel.usable_snr_db, 1),
        }
        return realistic_link_table(self.refresh(t), ranges, p.preamble_min_rssi_dbm, cs)

    def rate_use(self) -> dict[str, dict[str, list[int]]]:
        """Unicast attempts per link and rate since the start: ``{"n3>n17": {"11":
        [attempts, acked], ...}}`` (the ``stats`` command's ``rate_use``)."""
        out: dict[str, dict[str, list[int]]] = {}
        for i, rc in enumerate(self.rates):
            for dst, per_rate in rc.use().items():
                if 0 <= dst < self.n:
                    out[f"n{i + 1}>n{dst + 1}"] = {
                        f"{r:g}": [a, ok] for r, (a, ok) in sorted(per_rate.items())
                    }
        return out

    def stats(self) -> dict:
        return {**super().stats(), "rate_use": self.rate_use()}

    @property
    def counters(self) -> dict[str, int | float]:
        """What happened so far (the ns2 MAC's keys, and the realistic ones)."""
        c = self._counters
        c["ppdus"] = self._ppdus
        c["airtime_s"] = self._airtime
        return c
