"""The engines' outputs are exactly those recorded before they were recomposed.

Each case of :mod:`tests.daemon.enginetrace` (DSR, SMR in each mode, AODV, each with
TCP-BuS and Atra on and off) runs a seeded ten-node mobile scenario and hashes the full
trace: every frame's bytes, delivery, event, drop and timer. The hashes were recorded
before the engines were recomposed from components, and once more when the control
packets the daemon originates were marked DSCP CS6 (the two traces differed only in
the TOS byte and header checksum of control packets). Those cases run with the
false-failure veto off, as they were recorded; ``dsr-defaults`` and ``aodv-defaults``
run the defaults (the veto on) and were recorded when the veto became one. ``aodv``,
``aodv-bus``, ``aodv-atra`` and ``aodv-atra-bus`` were recorded again when AODV stopped
repairing idle routes (``repair_idle_routes``: with it on, the old hashes come back;
``test_idle_route_repair_off_is_the_only_change`` checks that). A mismatch means a behaviour
change: write both traces (``python3 -m tests.daemon.enginetrace DIR`` on the old and
the new code) and diff them. The statuses in the traces are checked against the typed
status model too.
"""

from __future__ import annotations

import json

import pytest

from manetkit.daemonstatus import engine_status, undeclared
from tests.daemon.enginetrace import CASES, _aodv, digest, run

EXPECTED = {
    "dsr": "79ff2cf331e0a2d16f62208bd4b74a1ae76fdcdf52a673351ac3a5b1740ce421",
    "dsr-options": "4a4e76c1919923a4df0282b28c27e7fe14508b5fe84e58912513ea6b252c1aa4",
    "dsr-no-grat": "acfb196eb3b69c108f745a84a4630568c2b28bb521dab4d455542cf7fd3ecdfc",
    "dsr-bus": "02e3159a7ff537f98505c82c3cc1d86500c99551b9cd41f997fb70dded54075d",
    "dsr-atra": "a0e1325c3cd1390926b7cb7a5d950e80bfda69e2fe639a03ab978609598c5556",
    "dsr-atra-rfp": "d63f7d3c137464fcc56d82ae6326245a9d22981b09d7ab8ba7e8172a4d60a865",
    "dsr-atra-bus": "abfb42692f23eb81b97dbeccbc218b956066ad0f184fdcabc597958d3b2bc959",
    "smr-backup1": "06332a6bbc55736a96d30bd6d4f4e77185eae087c138d02f707ed2a9812ac06b",
    "smr-backup2": "18fe758c50fb0bce0ed3589c7298de8480e723a59de19f6b12a25dd5043d7efe",
    "smr-concurrent": "27550f893d0bb34186bd65f7f104d228ac08f1724cf031682080dda9b7804e3e",
    "smr-any-broken": "bff4d04866c01a8fc45be76cd7b78c69feb5e1812cb134e8f1b887ed9c9a96c8",
    "smr-atra": "1d819884c2a2f2380af892798a9b5c3308fd0fcc3ba998f64d1e60ef3334fb94",
    "aodv": "bc26ed577447c5113931d575cb9439307beb33c88ec7cfc8fb7d97df09c8912b",
    "aodv-options": "93e10f6517a4e39fdfdd5586693b1ef382758fc943643069e8b42220449c38ac",
    "aodv-dest-only": "f7d0d74cda8939d7614c895dd6b72e2c14a3709b4bc71cfbeed57b67541268fd",
    "aodv-bus": "85b09d62ccfd06cc3cb748befd17bdecd233ab4fdcf52d55998d932a8307ec5b",
    "aodv-atra": "1fb6d2a44a03d446befba9d44c36584dd5e8a90ffc3efb611c1405b44edb7eaa",
    "aodv-atra-bus": "59632f8b2bb3caa99594d1a13dec7d3adf6d0142c0440874f4405bb02814e75f",
    "dsr-defaults": "717a1e93185c68a97138366dda9af519ed04014a212362dca411b0145deb2ce7",
    "aodv-defaults": "66077364ffd40fe9cea598bb4975067e17da69649f9309d615a819a52ce680c4",
}


OLD_IDLE_REPAIR = {
    "aodv": "cc367e516284b6a20f0b0044e8f7e3bca9c486f58459cabb2d0f17f333b4380d",
    "aodv-bus": "f822491d8fa02eb607d5ee03e579eea7d29629bd827c564fb5f090e4cd9dbc60",
}


def test_every_case_has_a_recorded_hash():
    assert set(EXPECTED) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_trace_unchanged(name):
    lines = CASES[name]()
    assert digest(lines) == EXPECTED[name]
    check_statuses(lines)


def check_statuses(lines: list[str]) -> None:
    """Every engine status of the trace is what :mod:`manetkit.daemonstatus` declares,
    every field typed, and reads back to the same JSON (the wire form is the engine's)."""
    for line in lines:
        _t, _node, kind, rest = line.split(" ", 3)
        if kind == "status":
            wire = json.loads(rest)
            model = engine_status(wire)
            assert undeclared(model) == [], f"{model.protocol} status fields with no type"
            assert model.model_dump(mode="json", exclude_unset=True) == wire


@pytest.mark.parametrize("name", sorted(OLD_IDLE_REPAIR))
def test_idle_route_repair_off_is_the_only_change(name):
    """With ``repair_idle_routes`` on, AODV's traces are the ones recorded before the
    option existed: skipping idle routes' repairs is the whole behaviour change."""
    cases = {
        "aodv": lambda: run(_aodv(repair_idle_routes=True)),
        "aodv-bus": lambda: run(_aodv(bus=True, repair_idle_routes=True), seed=3),
    }
    assert digest(cases[name]()) == OLD_IDLE_REPAIR[name]
