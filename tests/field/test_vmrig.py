"""The mac80211_hwsim rig: a Debian kernel under qemu, three radios in one IBSS cell as a
2-hop chain; the manetkit daemon (AODV and DSR) on the real 802.11 stack with nl80211
link sensing, carrying ping and HTTP from radio 1 to radio 3."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from manetkit.field.vmrig import run_rig

pytestmark = [
    pytest.mark.vm,
    pytest.mark.slow,
    pytest.mark.skipif(not shutil.which("qemu-system-x86_64"), reason="qemu not installed"),
]


def steps_of(result) -> dict[str, dict]:
    return {s["name"]: s for s in result.report.get("steps", [])}


def processes_using(path: Path) -> list[int]:
    """Processes whose command line names ``path`` (qemu names its 9p result dir)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if str(path).encode() in cmdline:
            pids.append(int(entry.name))
    return pids


@pytest.fixture
def rig_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The rig's temporary result dir goes under ``tmp_path``; afterwards (also after a
    failure) no qemu may still run on it and the dir must be gone."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    yield tmp_path
    left = processes_using(tmp_path)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"qemu processes left running: {left}"
    assert not list(tmp_path.glob("manetkit-vm-*")), "the rig left its result dir"


@pytest.mark.timeout(60)
def test_rig_kills_qemu_and_cleans_up_on_timeout(rig_tmp):
    result = run_rig(protocols=("static",), timeout=3)
    assert not result.ok and not result.report
    assert "qemu killed after 3 s" in result.console


@pytest.mark.timeout(420)
def test_static_aodv_and_dsr_over_hwsim_ibss(rig_tmp):
    result = run_rig(protocols=("static", "aodv", "dsr"), timeout=360)
    steps = steps_of(result)
    assert result.ok, result.report or result.console[-3000:]
    mac = steps["radios"]["detail"]["mac"]
    # 1 and 3 are out of each other's range; 2 hears both (group bitmasks)
    chain = steps["chain"]["detail"]
    assert chain == {"1": [mac["2"]], "2": sorted([mac["1"], mac["3"]]), "3": [mac["2"]]}
    # kernel forwarding on radio 2 first: the cell itself carries 2-hop traffic
    assert steps["ping-1-3"]["ok"] and steps["http-1-3"]["detail"]["bytes"] == 64 * 1024
    signal_step = steps["daemon-signal"]["detail"]
    for protocol, net in (("aodv", 42), ("dsr", 43)):
        # node 2's `manetkit status --json`: both neighbours, their MACs, nl80211 signal
        status = steps[f"{protocol}-status"]["detail"]
        for n in ("1", "3"):
            row = status[f"10.{net}.0.{n}"]
            assert row["mac"] == mac[n] and row["up"]
            assert -100 < row["signal_dbm"] < 0
        assert steps[f"{protocol}-ping-1-3"]["ok"]
        assert steps[f"{protocol}-http-1-3"]["detail"]["bytes"] == 64 * 1024
        route = steps[f"{protocol}-route"]["detail"]
        assert (route["hops"], route["next_hop"]) == (2, f"10.{net}.0.2")
        # radio 1's transmit signal (debugfs rx_rssi) moved; node 2's daemon saw it
        sig = signal_step[protocol]
        assert sig["after_dbm"] - sig["before_dbm"] == pytest.approx(
            signal_step["rx_rssi_change_db"], abs=2
        )
    # Atra RFP from nl80211 signals: radio 1 walking away is predicted to fail at
    # node 2 before it reaches the range edge
    walk = steps["rfp-walk"]["detail"]
    for protocol in ("aodv", "dsr"):
        assert walk["predicted_at_m"][protocol] < walk["range_m"]
    assert set(steps["daemons-down"]["detail"].values()) == {0}  # clean exits
