"""Faults during a transfer (docs/daemon.md): real daemons, real proxies, real TCP, one lab.

chain-4 (n1 - n2 - n3 - n4, DSR or AODV, split-TCP proxies in elfn mode, 11 Mb/s). For each
fault, a paced transfer n1 -> n4 (SHA-256 of what n4's application received against
what n1's sent) runs, the fault hits once some data went through, the broken part comes
back (restarted, as a supervisor would, or by itself), and:

* the byte stream is complete and correct, or an application saw an error: never a
  clean end of stream without all the bytes (``TRUNCATED``);
* the daemon said what happened in one line of its log (and recovered), or the process
  exited non-zero with the reason;
* at the end every node holds exactly one mesh0, one mesh route, one proxy nft table
  and one policy rule (nothing orphaned by the kills), and the lab fixture checks that
  no namespace survives ``lab down``.

The faults are independent (each one's part is back before the next), so one lab
serves them all in sequence (~1 min per stack on the 2-core CI machine). The lab runs
one radio process per node (``--radios process``), so a radio can be killed and
replugged on its own; with shared radios the medium makes a deleted radio0 again
itself (``test_shared_radios_netns``).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from manetkit.lab.nodes import radio_ready
from manetkit.lab.stacks import daemon_ready, proxy_ready
from tests.helpers.faults import LabProcs, Transfer, leftovers, ns_run, verdict
from tests.helpers.lab import SCENARIOS, wait_for, wait_ping

pytestmark = [pytest.mark.netns, pytest.mark.slow]

TOTAL = 512 * 1024  # bytes per transfer
RATE = 192 * 1024.0  # B/s: ~2.7 s of data; each fault lands mid-transfer
FAULT_AFTER = 128 * 1024  # received bytes before the fault
DST = "10.42.0.4"


def restart_daemon(p: LabProcs, lab: str, node: str) -> None:
    p.kill(f"daemon-{node}")
    p.start(f"daemon-{node}")
    wait_for(lambda: daemon_ready(lab, node), 20, f"daemon-{node} back")


def delete_tun(p: LabProcs, lab: str, node: str) -> None:
    ns_run(lab, node, "ip", "link", "del", "mesh0")
    wait_for(lambda: "re-created" in p.log(f"daemon-{node}"), 10, f"{node}'s mesh0 re-created")


def replug_radio(p: LabProcs, lab: str, node: str) -> None:
    """radio0 deleted (the lab radio exits non-zero, saying so), then a new radio
    re-creates it (the card plugged in again)."""
    ns_run(lab, node, "ip", "link", "del", "radio0")
    p.wait_gone(f"radio-{node}")
    p.start(f"radio-{node}")
    wait_for(lambda: radio_ready(lab, node), 10, f"radio-{node} attached again")
    wait_for(lambda: "is back" in p.log(f"daemon-{node}"), 10, f"daemon-{node} re-opened radio0")


def restart_medium(p: LabProcs, lab: str, node: str) -> None:
    p.kill("medium")
    p.start("medium")
    for n in ("n1", "n2", "n3", "n4"):
        wait_for(lambda n=n: radio_ready(lab, n), 15, f"radio-{n} re-attached")


def restart_proxy(p: LabProcs, lab: str, node: str) -> None:
    p.kill(f"proxy-{node}")
    p.start(f"proxy-{node}")
    wait_for(lambda: proxy_ready(lab, node), 20, f"proxy-{node} back")


# (name, node, fault, must the transfer complete?)
FAULTS: list[tuple[str, str, Callable[[LabProcs, str, str], None], bool]] = [
    ("daemon SIGKILL on a relay, restarted", "n2", restart_daemon, True),
    ("daemon SIGKILL on the source, restarted", "n1", restart_daemon, True),
    ("daemon SIGKILL on the destination, restarted", "n4", restart_daemon, True),
    ("TUN deleted on the destination", "n4", delete_tun, True),
    ("TUN deleted on the source", "n1", delete_tun, True),
    ("radio0 removed and re-added on a relay", "n3", replug_radio, True),
    ("medium restarted", "n2", restart_medium, True),
    # The destination proxy's sessions die with it: its app gets a reset (armed
    # SO_LINGER 0), never a FIN; the next transfer must go through the new proxy.
    ("proxy SIGKILL on the destination, restarted", "n4", restart_proxy, False),
    ("proxy SIGKILL on the source, restarted", "n1", restart_proxy, False),
]


@pytest.mark.parametrize("stack", ["dsr", "aodv"])
def test_faults_during_transfers(lab_factory, tmp_path, record_property, monkeypatch, stack):
    # A proxy whose peer restarted (its sessions gone) resets its app after the
    # partition timeout: 10 s instead of 30 keeps the test short.
    extra = tmp_path / "proxy-extra.yaml"
    extra.write_text("partition_timeout: 10\n")
    lab = lab_factory(
        SCENARIOS / "chain-4.yaml", "--stack", stack, "--proxy", "elfn",
        "--set", "radio.rate_mbps=11", "--radios", "process", "--proxy-config", str(extra),
        prefix="ft",
    )  # fmt: skip
    procs = LabProcs(lab)
    outcomes: list[str] = []
    port = 9100
    try:
        wait_ping(lab, "n1", DST, timeout=30)

        def transfer(name: str, fault=None, node: str = "", complete: bool = True) -> str:
            nonlocal port
            port += 1
            t = Transfer(lab, "n1", "n4", DST, port, TOTAL, RATE, tmp_path)
            try:
                t.start()
                if fault is not None:
                    wait_for(lambda: t.received() >= FAULT_AFTER, 30, f"{name}: data flowing")
                    fault(procs, lab, node)
                sent, got = t.wait(timeout=60)
            finally:
                t.stop()
            v = verdict(sent, got, TOTAL)
            line = (
                f"{name}: {v} (received {got.get('bytes')}/{TOTAL} B, "
                f"{sent.get('elapsed_s')} s; sender error {sent.get('error')}, "
                f"receiver error {got.get('error')})"
            )
            outcomes.append(line)
            ok = v == "complete" or (v == "error" and not complete)
            return "" if ok else line

        failures = [transfer("no fault")]
        for name, node, fault, complete in FAULTS:
            failures.append(transfer(name, fault, node, complete))
            if not complete:  # the part is back: a new transfer must go through
                failures.append(transfer(f"after: {name}"))
        # One line each, the reason included, never a traceback storm.
        for node in ("n1", "n4"):
            log = procs.log(f"daemon-{node}")
            assert log.count("mesh0 was deleted") == 1, log[-2000:]
            assert "Traceback" not in log, log[-4000:]
        log = procs.log("daemon-n3")
        assert log.count("radio interface radio0 is gone") == 1, log[-2000:]
        assert procs.log("radio-n3").count("radio0 was removed") == 1
        failures += [bad for n in ("n1", "n2", "n3", "n4") for bad in leftovers(lab, n)]
        for n in ("n1", "n2", "n3", "n4"):
            assert daemon_ready(lab, n) and proxy_ready(lab, n)
    finally:
        print("\n".join(outcomes))
        record_property("outcomes", outcomes)
        procs.reap()  # the processes this test restarted (lab down would kill them too)
    failures = [f for f in failures if f]
    assert not failures, "\n".join(failures)
