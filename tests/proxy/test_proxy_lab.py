"""The proxies in the lab: real medium, real DSR daemons, one proxy per node.

chain-4 at 11 Mbit/s: n1 -- n2 -- n3 -- n4, curl in n1 fetches a file over HTTP from
n4 (3 hops) through the proxies while the middle link n2-n3 is down for 5 s. The
application must see no error and get every byte (SHA-256). During the break,
``manetkit status`` (run through ``lab exec``, which points it at the node's daemon and
proxy) shows the session in the mode's state. tests/proxy/test_proxy_netns.py covers all
four modes over veth with a fake daemon; here fixed-rto, elfn and bus run on the real
stack (each costs ~35 s of CI time; plain is the kernel alone). ``--proxy bus`` turns on
the daemons' TCP-BuS, so n1's session must be frozen by the pivot's ERDN.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from manetkit import paths
from tests.helpers.lab import SCENARIOS, labs_made, manetkit, nsexec, nspopen, wait_for
from tests.proxy.httpd import body

pytestmark = [pytest.mark.netns, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SIZE = 2_000_000  # ~13 s at the chain's ~1.2 Mbit/s: room for a break mid-transfer
BREAK_S = 5.0


@pytest.fixture
def lab_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., str]]:
    """``up(*args) -> lab``: ``manetkit lab up`` in a private rundir; always brought down,
    and no namespace of it may survive."""
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.setenv("MANETKIT_RUNDIR", str(run))
    with labs_made() as make:
        yield lambda *args: make(SCENARIOS / "chain-4.yaml", *args, prefix="px")


def node_status(lab: str) -> dict:
    """``manetkit status --json`` as a user runs it in n1 (``lab exec`` sets the sockets)."""
    r = manetkit("lab", "exec", "n1", "--name", lab, "--", sys.executable, "-m", "manetkit.cli",
                 "status", "--json")  # fmt: skip
    return json.loads(r.stdout)


@pytest.mark.parametrize("mode", ["fixed-rto", "elfn", "bus"])
def test_transfer_over_3_hops_survives_a_5s_break(lab_up, mode: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lab = lab_up("--stack", "dsr", "--proxy", mode, "--set", "radio.rate_mbps=11")
    # Each node's proxy has its nft table (lab up waited for it to subscribe to its daemon).
    for n in ("n1", "n4"):
        assert "manetkit_proxy" in nsexec(lab, n, "nft", "list", "tables").stdout
    srv = nspopen(lab, "n4", sys.executable, "-m", "tests.proxy.httpd", "8080")
    out = tmp_path / "out"
    try:
        wait_for(lambda: ":8080" in nsexec(lab, "n4", "ss", "-ltn").stdout, 10, "httpd in n4")
        curl = subprocess.Popen(
            ["ip", "netns", "exec", paths.netns_name(lab, "n1"), "curl", "-sS", "-o", str(out),
             "-w", "%{http_code}", "--max-time", "120", f"http://10.42.0.4:8080/{SIZE}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            wait_for(lambda: out.exists() and out.stat().st_size > SIZE // 6, 40, "data flowing")
            manetkit("lab", "link", "n2", "n3", "down", "--name", lab)
            t_down = time.monotonic()
            seen: set[tuple[str, str]] = set()
            frozen_by: set[str | None] = set()
            rtos: list[float] = []
            while time.monotonic() - t_down < BREAK_S:
                for s in node_status(lab).get("proxy", {}).get("sessions", []):
                    seen.add((s["mode"], s["state"]))
                    if s["state"] in ("frozen", "probing"):
                        frozen_by.add(s.get("frozen_by"))
                    if s.get("tcp_info"):
                        rtos.append(s["tcp_info"]["rto_ms"])
                time.sleep(0.5)  # a sample every 0.5 s through the break (its length is under test)
            manetkit("lab", "link", "n2", "n3", "auto", "--name", lab)
            code, err = curl.communicate(timeout=90)
        finally:
            if curl.poll() is None:
                curl.kill()
                curl.wait()
    finally:
        srv.terminate()
        srv.wait(5)
    # The application saw no error and got every byte, in order.
    assert curl.returncode == 0 and code == "200", (curl.returncode, code, err)
    assert hashlib.sha256(out.read_bytes()).digest() == hashlib.sha256(body(SIZE)).digest()
    assert any(m == mode for m, _ in seen), seen  # the transfer went through n1's proxy
    if mode == "elfn":
        # the real daemon's route-down froze the session
        assert {"frozen", "probing", "resuming"} & {st for _, st in seen}, seen
    elif mode == "bus":
        # the pivot's ERDN (relayed by n2's daemon, BuS on) froze n1's session
        assert "erdn" in frozen_by, (seen, frozen_by)
    else:
        # Reno-F: the mesh leg's RTO never grows beyond the cap (TCP_RTO_MAX_MS = 1000)
        assert rtos and max(rtos) <= 1000 + 1, rtos
    st = node_status(lab)["proxy"]
    assert st["counters"]["resets"] == 0 and st["counters"]["accepted"] >= 1, st["counters"]
