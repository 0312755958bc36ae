"""The lab radio's station table: what a node knows about each neighbour it hears.

Modelled on mac80211's ``struct sta_info`` as ``iw dev wlan0 station dump`` shows it, so
software written for a laptop's Wi-Fi (the daemon's link sensing) reads the same numbers
in the lab: last and average signal, inactivity, rx/tx packets and bytes, tx retries and
tx failures. The table is pure data (time is passed in), the radio shell feeds it.

Beyond iw's fields, each station sums the received power of every frame heard from it
(``rx_signal_frames``, ``rx_signal_sum_dbm``, overheard unicasts included): a client that
polls the table gets the mean power of the frames since its previous poll from the
differences, so per-frame RSSI reaches it without an event per frame (Atra's RFP,
docs/atra.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from manetkit.macaddr import format_mac

# mac80211 keeps the average signal as an EWMA with weight 1/8 (DECLARE_EWMA(signal, 10, 8)
# in net/mac80211/sta_info.h); the first sample initialises it.
SIGNAL_EWMA_WEIGHT = 8
# mac80211 removes an IBSS station after 60 s without frames (IEEE80211_IBSS_INACTIVITY_LIMIT
# in net/mac80211/ibss.c); the radio does the same unless told otherwise.
DEFAULT_EXPIRY_S = 60.0


@dataclass(slots=True)
class Station:
    """Counters for one neighbour MAC."""

    mac: bytes
    first_seen: float
    last_active: float
    signal_dbm: float | None = None
    signal_avg_dbm: float | None = None
    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0
    tx_retries: int = 0
    tx_failed: int = 0
    rx_overheard: int = 0  # its unicasts to other nodes that we heard (radio0 promiscuous)
    # every frame heard from it (to us, broadcast or overheard): count and sum of dBm
    rx_signal_frames: int = 0
    rx_signal_sum_dbm: float = 0.0

    def as_dict(self, now: float) -> dict:
        return {
            "mac": format_mac(self.mac),
            "signal_dbm": None if self.signal_dbm is None else round(self.signal_dbm, 2),
            "signal_avg_dbm": None
            if self.signal_avg_dbm is None
            else round(self.signal_avg_dbm, 2),
            "inactive_ms": max(0, int((now - self.last_active) * 1000)),
            "connected_s": max(0, int(now - self.first_seen)),
            "rx_packets": self.rx_packets,
            "rx_bytes": self.rx_bytes,
            "tx_packets": self.tx_packets,
            "tx_bytes": self.tx_bytes,
            "tx_retries": self.tx_retries,
            "tx_failed": self.tx_failed,
            "rx_overheard": self.rx_overheard,
            "rx_signal_frames": self.rx_signal_frames,
            "rx_signal_sum_dbm": round(self.rx_signal_sum_dbm, 2),
        }


class StationTable:
    """Stations keyed by MAC (``bytes``); the radio's hot path uses ``by_mac`` directly."""

    def __init__(self, expiry_s: float = DEFAULT_EXPIRY_S) -> None:
        self.expiry_s = expiry_s
        self.by_mac: dict[bytes, Station] = {}

    def received(self, mac: bytes, signal_dbm: float, nbytes: int, now: float) -> bool:
        """Account a frame heard from ``mac``; True if the station is new."""
        st, new = self._heard(mac, signal_dbm, now)
        st.rx_packets += 1
        st.rx_bytes += nbytes
        return new

    def overheard(self, mac: bytes, signal_dbm: float, now: float) -> bool:
        """Account a unicast from ``mac`` to another node that we heard; True if new.

        It updates the signal and activity (the link to ``mac`` works) but not
        ``rx_packets``/``rx_bytes``, which count frames addressed to us, as iw shows them.
        """
        st, new = self._heard(mac, signal_dbm, now)
        st.rx_overheard += 1
        return new

    def _heard(self, mac: bytes, signal_dbm: float, now: float) -> tuple[Station, bool]:
        """The station ``mac`` (made if new) with its signal and activity updated."""
        st = self.by_mac.get(mac)
        if st is None:
            st = self.by_mac[mac] = Station(
                mac,
                now,
                now,
                signal_dbm,
                signal_dbm,
                rx_signal_frames=1,
                rx_signal_sum_dbm=signal_dbm,
            )
            return st, True
        st.rx_signal_frames += 1
        st.rx_signal_sum_dbm += signal_dbm
        st.signal_dbm = signal_dbm
        st.signal_avg_dbm += (signal_dbm - st.signal_avg_dbm) / SIGNAL_EWMA_WEIGHT
        st.last_active = now
        return st, False

    def sent(self, mac: bytes, nbytes: int) -> None:
        """Account a unicast frame the node sends to ``mac`` (known stations only, as mac80211)."""
        st = self.by_mac.get(mac)
        if st is not None:
            st.tx_packets += 1
            st.tx_bytes += nbytes

    def tx_status(self, mac: bytes, retries: int, ok: bool, now: float) -> None:
        """The medium's report of a unicast's fate: retries used, delivered or failed."""
        st = self.by_mac.get(mac)
        if st is None:
            return
        st.tx_retries += retries
        if ok:
            st.last_active = now  # an ACK is activity too (ieee80211_sta_last_active)
        else:
            st.tx_failed += 1

    def expire(self, now: float) -> list[bytes]:
        """Remove and return the stations inactive for longer than ``expiry_s``."""
        gone = [m for m, st in self.by_mac.items() if now - st.last_active > self.expiry_s]
        for mac in gone:
            del self.by_mac[mac]
        return gone

    def dump(self, now: float) -> list[dict]:
        return [self.by_mac[m].as_dict(now) for m in sorted(self.by_mac)]


def format_iw(stations: list[dict], interface: str = "radio0", now_ms: int = 0) -> str:
    """Text exactly as ``iw dev <interface> station dump`` prints these fields.

    Order, labels, tabs and integer dBm follow iw's ``print_sta_handler`` (station.c); fields
    the lab does not model (bitrates, flags) are left out, as iw leaves out absent attributes.
    """
    out: list[str] = []
    for st in stations:
        lines = [f"Station {st['mac']} (on {interface})"]
        lines.append(f"\tinactive time:\t{st['inactive_ms']} ms")
        lines.append(f"\trx bytes:\t{st['rx_bytes']}")
        lines.append(f"\trx packets:\t{st['rx_packets']}")
        lines.append(f"\ttx bytes:\t{st['tx_bytes']}")
        lines.append(f"\ttx packets:\t{st['tx_packets']}")
        lines.append(f"\ttx retries:\t{st['tx_retries']}")
        lines.append(f"\ttx failed:\t{st['tx_failed']}")
        if st.get("signal_dbm") is not None:
            lines.append(f"\tsignal:  \t{round(st['signal_dbm'])} dBm")
        if st.get("signal_avg_dbm") is not None:
            lines.append(f"\tsignal avg:\t{round(st['signal_avg_dbm'])} dBm")
        if "connected_s" in st:
            lines.append(f"\tconnected time:\t{st['connected_s']} seconds")
        lines.append(f"\tcurrent time:\t{now_ms} ms")
        out.append("\n".join(lines) + "\n")
    return "".join(out)
