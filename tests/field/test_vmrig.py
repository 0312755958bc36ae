"""The mac80211_hwsim rig: a Debian kernel under qemu, three radios in one IBSS cell as a
2-hop chain, traffic from radio 1 to radio 3, nl80211 link sensing on the real stack."""

from __future__ import annotations

import shutil

import pytest

from manetkit.field.vmrig import run_rig

pytestmark = [
    pytest.mark.vm,
    pytest.mark.slow,
    pytest.mark.skipif(not shutil.which("qemu-system-x86_64"), reason="qemu not installed"),
]


def steps_of(result) -> dict[str, dict]:
    return {s["name"]: s for s in result.report.get("steps", [])}


@pytest.mark.timeout(600)
def test_static_chain_over_hwsim_ibss():
    result = run_rig(protocols=("static",), timeout=420)
    steps = steps_of(result)
    assert result.ok, result.report or result.console[-3000:]
    # 1 and 3 are out of each other's range; 2 hears both (group bitmasks)
    chain = steps["chain"]["detail"]
    assert len(chain["2"]) == 2 and len(chain["1"]) == len(chain["3"]) == 1
    # the nl80211 backend saw radio 1's signal move by what was written to rx_rssi
    sig = steps["nl80211-signal"]["detail"]
    assert sig["after_dbm"] - sig["before_dbm"] == pytest.approx(sig["rx_rssi_change_db"], abs=2)
    assert steps["ping-1-3"]["ok"] and steps["http-1-3"]["detail"]["bytes"] == 64 * 1024
