"""The lab link-sensing backend against a fake lab radio control socket (JSON lines)."""

from __future__ import annotations

import asyncio
import contextlib
import json

from manetkit.daemon.linksense.base import StationGone, StationSeen, StationTxFailed
from manetkit.daemon.linksense.lab import LabBackend
from manetkit.procs import wait_for_async

SEEN_2 = StationSeen(bytes.fromhex("026d6b000002"), -61.5)
SEEN_3 = StationSeen(bytes.fromhex("026d6b000003"), -80.0)

M2 = "02:6d:6b:00:00:02"
M3 = "02:6d:6b:00:00:03"
FRAME = bytes.fromhex("026d6b000002026d6b00000188b5") + bytes(20)


class FakeRadio:
    """Serves ``stations`` from a mutable table and streams events to subscribers."""

    def __init__(self) -> None:
        self.table = [{"mac": M2, "signal_dbm": -61.5, "inactive_ms": 10, "rx_packets": 5}]
        self.subscribers: list[asyncio.StreamWriter] = []
        self.polls = 0

    async def serve(self, reader, writer):
        while line := await reader.readline():
            req = json.loads(line)
            if req["cmd"] == "subscribe":
                self.subscribers.append(writer)
                reply = {"ok": True, "subscribed": True}
            elif req["cmd"] == "stations":
                self.polls += 1
                reply = {"ok": True, "stations": self.table}
            else:
                reply = {"ok": False}
            writer.write((json.dumps(reply) + "\n").encode())
            await writer.drain()

    def emit(self, ev: dict) -> None:
        for w in self.subscribers:
            w.write((json.dumps(ev) + "\n").encode())


def test_lab_backend_reports_stations_failures_and_departures(tmp_path):
    async def main():
        radio = FakeRadio()
        path = tmp_path / "radio-ctl.sock"
        server = await asyncio.start_unix_server(radio.serve, path=str(path))
        got = []
        loop = asyncio.get_running_loop()
        backend = LabBackend("radio0", lambda now, ev: got.append(ev), path, loop.time, poll_s=0.01)
        task = asyncio.create_task(backend.run())
        try:
            await wait_for_async(lambda: radio.subscribers and radio.polls >= 1, 5, "a subscriber")
            await wait_for_async(lambda: SEEN_2 in got, 5, "station 2 seen")
            # A station whose rx_packets does not grow is not "heard" again.
            n_seen = sum(isinstance(e, StationSeen) for e in got)
            p = radio.polls
            await wait_for_async(lambda: radio.polls >= p + 3, 5, "three more polls")
            assert sum(isinstance(e, StationSeen) for e in got) == n_seen
            # New activity and a new station are.
            radio.table = [
                {"mac": M2, "signal_dbm": -70.0, "inactive_ms": 5, "rx_packets": 9},
                {"mac": M3, "signal_dbm": None, "signal_avg_dbm": -80.0, "rx_packets": 1},
            ]
            await wait_for_async(lambda: SEEN_3 in got, 5, "station 3 seen")
            assert StationSeen(bytes.fromhex("026d6b000002"), -70.0) in got
            assert {s.mac.hex() for s in backend.stations()} == {"026d6b000002", "026d6b000003"}
            # Pushed events: tx failure with its frame, departure; garbage is counted.
            radio.emit({"event": "tx-failed", "mac": M2, "frame": FRAME.hex()})
            radio.emit({"event": "station-gone", "mac": M3, "reason": "inactive"})
            radio.emit({"event": "tx-failed", "mac": "nonsense"})
            await wait_for_async(
                lambda: any(isinstance(e, StationGone) for e in got), 5, "a station gone"
            )
            fails = [e for e in got if isinstance(e, StationTxFailed)]
            assert fails == [StationTxFailed(bytes.fromhex("026d6b000002"), FRAME)]
            assert StationGone(bytes.fromhex("026d6b000003"), "inactive") in got
            assert backend.malformed >= 1
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            for w in radio.subscribers:
                w.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())
