"""``manetkit lab compose``: the generated file (no Docker needed)."""

from __future__ import annotations

import json

import pytest

from manetkit.errors import UserError
from manetkit.lab import compose
from manetkit.lab.scenario import SHIPPED_SCENARIOS, load_scenario


def test_chain3_services_and_configs():
    sc = load_scenario(SHIPPED_SCENARIOS / "chain-3.yaml", {"stack": "dsr", "proxy": "elfn"})
    doc = compose.compose_file(sc, "c3")
    assert list(doc["services"]) == ["medium", "n1", "n2", "n3"]
    n2 = doc["services"]["n2"]
    assert n2["cap_add"] == ["NET_ADMIN"]
    assert n2["devices"] == ["/dev/net/tun:/dev/net/tun"]
    env = n2["environment"]
    assert env["MK_ADDR"] == "10.42.0.2"
    assert json.loads(env["MK_DAEMON"])["protocol"] == "dsr"
    assert json.loads(env["MK_PROXY"])["mode"] == "elfn"
    assert set(doc["volumes"]) == {"logs", "logs-n1", "logs-n2", "logs-n3"}


def test_no_stack_no_daemon():
    sc = load_scenario(SHIPPED_SCENARIOS / "chain-3.yaml", {"stack": "none", "proxy": "none"})
    env = compose.compose_file(sc, "c3")["services"]["n1"]["environment"]
    assert env["MK_DAEMON"] == "" and env["MK_PROXY"] == ""


def test_setdest_refused(tmp_path):
    sc = load_scenario(SHIPPED_SCENARIOS / "walkaway.yaml")
    if sc.mobility.model != "setdest":
        pytest.skip("walkaway.yaml is not a setdest scenario")
    with pytest.raises(UserError, match="setdest"):
        compose.compose_file(sc, "w")


@pytest.mark.parametrize("stack", ["babeld", "batmand"])
def test_peer_stacks_refused(stack):
    """Only a --set stack= (or a scenario's own stack:) reaches it: --stack's choices
    leave them out. The file would start no routing daemon and never become healthy."""
    sc = load_scenario(SHIPPED_SCENARIOS / "chain-3.yaml", {"stack": stack, "proxy": "plain"})
    with pytest.raises(UserError, match=rf"stack {stack}: lab compose does not run it"):
        compose.compose_file(sc, "c3")


def test_peer_stack_refused_by_the_cli():
    from tests.helpers.lab import manetkit

    r = manetkit("lab", "compose", str(SHIPPED_SCENARIOS / "chain-3.yaml"), "--set",
                 "stack=babeld", check=False, timeout=60)  # fmt: skip
    assert r.returncode == 2 and r.stdout == ""
    assert "stack babeld: lab compose does not run it" in r.stderr
    assert "lab up --stack babeld" in r.stderr


def test_shipped_files_are_current():
    """docker/compose/*.yml are what `manetkit lab compose` writes today."""
    root = SHIPPED_SCENARIOS.parents[1] / "docker" / "compose"
    for name, stack in (("chain-5", "dsr"), ("rwp-30", "aodv")):
        sc = load_scenario(SHIPPED_SCENARIOS / f"{name}.yaml", {"stack": stack})
        from manetkit.lab.scenario import lab_name

        lab = lab_name(sc, f"{name}.yaml")
        assert (root / f"{name}.yml").read_text() == compose.render(sc, lab, source=f"{name}.yaml")
