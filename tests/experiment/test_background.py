"""CBR/UDP background flows (spec ``background:``, Dyer & Boppana section III): the
rate, the seeded pairs, and both ends counting real datagrams on loopback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from manetkit.experiment import spec as S
from manetkit.procs import wait_for
from tests.experiment.test_spec import base
from tests.helpers.lab import REPO


def test_the_papers_load_is_ten_flows_of_512_bytes_at_100_kbits():
    bg = S.Background()
    assert (bg.flows, bg.kbps, bg.packet_bytes) == (10, 100.0, 512)
    # 100 kbit/s over 10 flows of 512-byte datagrams: 2.44 datagrams/s each
    assert bg.pps() * bg.flows * bg.packet_bytes * 8 == 100_000
    assert abs(bg.pps() - 2.441) < 1e-3


def test_background_pairs_come_from_the_seed_and_never_loop():
    sp = S.spec_from_dict(base(traffics=[{"kind": "bulk", "background": {"flows": 40}}]))
    t = sp.traffics[0]
    one = S.background_pairs(t, 1, 5)
    assert len(one) == 40 and all(a != b for a, b in one)
    assert one == S.background_pairs(t, 1, 5)  # every stack at a seed: the same flows
    assert one != S.background_pairs(t, 2, 5)
    assert {n for p in one for n in p} <= {f"n{i}" for i in range(1, 6)}
    given = S.spec_from_dict(
        base(traffics=[{"kind": "bulk", "background": {"flows": 1, "pairs": [["n5", "n1"]]}}])
    )
    assert S.background_pairs(given.traffics[0], 7, 5) == [("n5", "n1")]
    assert S.background_pairs(S.spec_from_dict(base()).traffics[0], 1, 5) == []


def _end(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "manetkit.bench.cbr", *args], cwd=REPO)


def _catches_sigterm(pid: int) -> bool:
    """The process has its SIGTERM handler (the SigCgt mask of /proc/PID/status)."""
    status = Path(f"/proc/{pid}/status").read_text()
    caught = int(next(ln.split()[1] for ln in status.splitlines() if ln.startswith("SigCgt:")), 16)
    return bool(caught >> (signal.SIGTERM - 1) & 1)


def test_a_cbr_sender_and_receiver_count_what_crossed(tmp_path: Path):
    """Loopback loses nothing: the receiver counts every datagram the sender sent (but
    one that may be in flight at SIGTERM), at the rate asked for."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rx, tx = tmp_path / "rx.json", tmp_path / "tx.json"
    recv = _end("recv", str(port), "--bind", "127.0.0.1", "--out", str(rx))
    # the receiver's socket is bound once ss lists it
    wait_for(
        lambda: (
            f":{port} " in subprocess.run(["ss", "-Hlun"], capture_output=True, text=True).stdout
        ),
        10,
        "the receiver's socket",
    )
    send = _end("send", "127.0.0.1", str(port), "--bytes", "100", "--pps", "50", "--out", str(tx))
    # SIGTERM before the sender caught it would kill it without its JSON (seen with a
    # lab loading the CPU: Python's start-up took more than the traffic's 1.5 s)
    wait_for(lambda: _catches_sigterm(send.pid), 20, "the sender's SIGTERM handler", 0.02)
    time.sleep(1.5)  # the traffic's window, which the rate is measured over: not a wait
    send.send_signal(signal.SIGTERM)
    send.wait(10)
    recv.send_signal(signal.SIGTERM)
    recv.wait(10)
    sent, got = json.loads(tx.read_text()), json.loads(rx.read_text())
    assert sent["errors"] == 0
    # the rate over the sender's own time (its start-up is not in it), and no bursts
    assert sent["elapsed_s"] > 0.3
    assert 0.8 * 50 * sent["elapsed_s"] <= sent["sent"] <= 50 * sent["elapsed_s"] + 2
    assert sent["sent"] - 1 <= got["received"] <= sent["sent"]
    assert got["bytes"] == 100 * got["received"]
