"""The engines' outputs are exactly those recorded before they were recomposed.

Each case of :mod:`tests.daemon.enginetrace` (DSR, SMR in each mode, AODV, each with
TCP-BuS and Atra on and off) runs a seeded ten-node mobile scenario and hashes the full
trace: every frame's bytes, delivery, event, drop and timer. A mismatch means a
behaviour change: write both traces (``python3 -m tests.daemon.enginetrace DIR`` on
the old and the new code) and diff them.
"""

from __future__ import annotations

import pytest

from tests.daemon.enginetrace import CASES, digest

EXPECTED = {
    "dsr": "5760051498510af6a45c48b5c72dc083d2fa363538cf804381b659f9fa08d0ea",
    "dsr-options": "f6f1a24eab42e3e300e933ec1a6dfc8dc37e1fe220d53f2e9aa5813b6cb6e8a6",
    "dsr-no-grat": "96cd2eb83f2fa816c47cd8289ae6c5196ce24e4f95f7328c30f62fa54b5d06f5",
    "dsr-bus": "6e2bc47efdefa0933fb0934d43173f400e8b72d15ae5bcd3b565b20b68a5b848",
    "dsr-atra": "5a2cdd75d5290e44fc7c08959e8a69544c0f5ffe54b15fb9eb57a583633661bf",
    "dsr-atra-rfp": "d72ec7abec8a5f82c2bf874f3eba303d63f0eaabca0a02f7a43814944229ae1a",
    "dsr-atra-bus": "52d6d1ddfdd035c404510d333cf198d41610974dcfce1f31710bb1a3ddd9d1a7",
    "smr-backup1": "1b9d5b2c7d7dd686da3046e370bfdf07da48bdbac271a4e61dcb931dd6c74ea8",
    "smr-backup2": "1947ab353e41d8b37c6b7985be7bd77b8f5af37aca67257ee3d3e5a88cd08545",
    "smr-concurrent": "dc5a5390fff21b03016a81cb688b1fad844b33e053dfd34f452bb2e8b1c846c7",
    "smr-any-broken": "195c9fbc350ec836da1dfb9ded3493692dc043badb6cf56cf9a3a2c8d92d85f3",
    "smr-atra": "8a346ccd94d56e0fed2ef86d31af9434b5981c6a511ee807811e72ce918faed3",
    "aodv": "eb390c7e165dc4e3276be10dd4f672d71259ece6b58d1b200387c555d915a2e7",
    "aodv-options": "65dae8da0d9872b63ee7b3064539db9aec11ae747811f807932d4f06e9838876",
    "aodv-dest-only": "6ae87f945c664f1d1f6608fd072302e30d6c8ba3446761c1936fc144fe03c01b",
    "aodv-bus": "77f38a0a66d75a9087cad1f9ff453028d88415ce9ed4b4370bb22eb6217d2d94",
    "aodv-atra": "5dfd68df4722b6790a0fb6e6c24127206dbe11aa696764bbbbaa6a2c83cba54d",
    "aodv-atra-bus": "2df8c0f56cebc82dd43ebb5afcbc6577b7d82ef61148f999ac71dfa0d04110c9",
}


def test_every_case_has_a_recorded_hash():
    assert set(EXPECTED) == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_trace_unchanged(name):
    assert digest(CASES[name]()) == EXPECTED[name]
