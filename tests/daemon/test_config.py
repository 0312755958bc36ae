"""Daemon config: defaults, refusals that name the field and the reason, --check."""

from __future__ import annotations

import subprocess
import sys
from ipaddress import IPv4Address

import pytest
import yaml

from manetkit.daemon.config import load_config, parse_config
from manetkit.errors import UserError


def test_defaults():
    cfg = parse_config({"address": "10.42.0.7", "protocol": "static"})
    assert cfg.address == IPv4Address("10.42.0.7")
    assert str(cfg.prefix) == "10.42.0.0/16"
    assert cfg.ethertype == 0x88B5
    assert cfg.tun_name == "mesh0"
    assert cfg.radio_interface == "wlan0"
    assert cfg.send_buffer.packets == 64 and cfg.send_buffer.timeout_s == 30.0
    assert cfg.link_sensing.hysteresis.missed_hellos >= 2  # one lost hello never tears down
    assert cfg.tun_mtu() == 1500


@pytest.mark.parametrize(
    "data, field, reason",
    [
        ({}, "address", "Field required"),
        ({"address": "10.42.0.300"}, "address", "valid IPv4"),
        ({"address": "10.43.0.1"}, "(top level)", "not inside prefix"),
        ({"address": "10.42.0.1", "protocol": "olsr"}, "protocol", "'aodv', 'dsr', 'smr' or 'static'"),
        ({"address": "10.42.0.1", "ethertype": "0x0800x"}, "ethertype", "not a number"),
        ({"address": "10.42.0.1", "ethertype": 5}, "ethertype", "greater than or equal"),
        (
            {"address": "10.42.0.1", "send_buffer": {"packets": 0}},
            "send_buffer.packets",
            "greater than or equal to 1",
        ),
        ({"address": "10.42.0.1", "send_bufer": {}}, "send_bufer", "Extra inputs"),
        (
            {"address": "10.42.0.1", "link_sensing": {"hysteresis": {"missed_hellos": 1}}},
            "link_sensing.hysteresis.missed_hellos",
            "greater than or equal to 2",
        ),
        (
            {"address": "10.42.0.1", "link_sensing": {"backend": "lab"}},
            "(top level)",
            "needs a 'lab:' section",
        ),
        (
            {"address": "10.42.0.1", "lab": {"name": "Bad-Name", "node": "n1"}},
            "lab.name",
            "1-12 characters",
        ),
        (
            {"address": "10.42.0.1", "static_neighbours": {"10.42.0.2": "zz"}},
            "static_neighbours",
            "not a MAC",
        ),
    ],
)
def test_refusals_name_field_and_reason(data, field, reason):
    with pytest.raises(UserError) as exc:
        parse_config(data, "node.yaml")
    msg = str(exc.value)
    assert f"  {field}:" in msg, msg
    assert reason in msg, msg


def test_ethertype_hex_string():
    assert parse_config({"address": "10.42.0.1", "ethertype": "0x88b6"}).ethertype == 0x88B6


def test_load_bad_yaml(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("address: [\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_config(p)
    with pytest.raises(UserError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml")


def test_cli_check_prints_effective_config(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("address: 10.42.0.3\nprotocol: static\nstatic_routes: {10.42.0.9: 10.42.0.4}\n")
    out = subprocess.run(
        [sys.executable, "-m", "manetkit.cli", "daemon", "--config", str(p), "--check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    eff = yaml.safe_load(out)
    assert eff["address"] == "10.42.0.3"
    assert eff["ethertype"] == "0x88B5"
    assert eff["static_routes"] == {"10.42.0.9": "10.42.0.4"}
    assert eff["send_buffer"] == {"packets": 64, "timeout_s": 30.0}


def test_cli_bad_config_exit_2(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("address: 10.42.0.3\nlog_level: loud\n")
    r = subprocess.run(
        [sys.executable, "-m", "manetkit.cli", "daemon", "--config", str(p), "--check"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2
    assert "log_level" in r.stderr and "Traceback" not in r.stderr


def test_protocol_sections_errors_name_the_nested_field():
    data = {
        "address": "10.42.0.1",
        "protocol": "dsr",
        "dsr": {"send_buffer_packets": 0, "bogus": 1},
    }
    with pytest.raises(UserError) as err:
        parse_config(data, "node.yaml")
    text = str(err.value)
    assert "dsr.send_buffer_packets: Input should be greater than or equal to 1" in text
    assert "dsr.bogus: Extra inputs are not permitted" in text
