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
        (
            {"address": "10.42.0.1", "protocol": "olsr"},
            "protocol",
            "'aodv', 'dsr', 'smr' or 'static'",
        ),
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


def daemon_check(tmp_path, config: str) -> subprocess.CompletedProcess[str]:
    """``manetkit daemon --config <config written to a file> --check``, as a user runs it."""
    p = tmp_path / "c.yaml"
    p.write_text(config)
    return subprocess.run(
        [sys.executable, "-m", "manetkit.cli", "daemon", "--config", str(p), "--check"],
        capture_output=True,
        text=True,
    )


def test_cli_check_prints_effective_config(tmp_path):
    r = daemon_check(
        tmp_path, "address: 10.42.0.3\nprotocol: static\nstatic_routes: {10.42.0.9: 10.42.0.4}\n"
    )
    assert r.returncode == 0, r.stderr
    eff = yaml.safe_load(r.stdout)
    assert eff["address"] == "10.42.0.3"
    assert eff["ethertype"] == "0x88B5"
    assert eff["static_routes"] == {"10.42.0.9": "10.42.0.4"}
    assert eff["send_buffer"] == {"packets": 64, "per_destination": 64, "timeout_s": 30.0}


def test_cli_bad_config_exit_2(tmp_path):
    r = daemon_check(tmp_path, "address: 10.42.0.3\nlog_level: loud\n")
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


# --- typed protocol sections: refused at load, with field and reason --------------------

_SECTION_REFUSALS = [
    ("aodv", {"hello_interval": 1}, "aodv.hello_interval", "Extra inputs are not permitted"),
    ("aodv", {"active_route_timeout_ms": 0}, "aodv.active_route_timeout_ms", "greater than 0"),
    ("aodv", {"bus_max_rexmt": "many"}, "aodv.bus_max_rexmt", "valid integer"),
    ("dsr", {"cache_reply": True}, "dsr.cache_reply", "Extra inputs are not permitted"),
    ("dsr", {"max_salvage_count": 16}, "dsr.max_salvage_count", "less than or equal to 15"),
    ("smr", {"modes": "backup1"}, "smr.modes", "Extra inputs are not permitted"),
    ("smr", {"mode": "backup3"}, "smr.mode", "'concurrent', 'backup1' or 'backup2'"),
    ("smr", {"paths": 0}, "smr.paths", "greater than or equal to 1"),
    ("smr", {"rediscover": "never"}, "smr.rediscover", "'all-broken' or 'any-broken'"),
    ("atra", {"rfq": True}, "atra.rfq", "Extra inputs are not permitted"),
    ("atra", {"history": 1}, "atra.history", "greater than or equal to 2"),
    ("atra", {"pre": "sometimes"}, "atra.pre", "valid boolean"),
]


@pytest.mark.parametrize(("section", "values", "field", "reason"), _SECTION_REFUSALS)
@pytest.mark.parametrize("protocol", ["aodv", "dsr", "smr"])
def test_protocol_sections_refused_at_load(section, values, field, reason, protocol):
    """Every section is checked whichever protocol runs: a typo in an unused section is
    still a typo (and the next protocol switch would trip over it)."""
    data = {"address": "10.42.0.1", "protocol": protocol, section: values}
    with pytest.raises(UserError) as exc:
        parse_config(data, "node.yaml")
    msg = str(exc.value)
    assert msg.startswith("node.yaml: invalid configuration"), msg
    assert f"  {field}: " in msg and reason in msg, msg


def test_atra_on_static_is_refused_by_name():
    with pytest.raises(UserError, match=r"  atra: the static engine has no Atra support"):
        parse_config({"address": "10.42.0.1", "protocol": "static", "atra": {"rfp": True}})
    # an empty section asks for nothing
    assert parse_config({"address": "10.42.0.1", "protocol": "static", "atra": {}})


def test_sections_are_the_engines_models():
    from manetkit.daemon.engines.aodv import AodvConfig
    from manetkit.daemon.engines.dsr import DsrConfig
    from manetkit.daemon.engines.smr import Mode, SmrConfig

    cfg = parse_config(
        {"address": "10.42.0.1", "protocol": "smr", "smr": {"mode": "backup2", "paths": 3}}
    )
    assert isinstance(cfg.aodv, AodvConfig) and isinstance(cfg.dsr, DsrConfig)
    eng = cfg.engine_config()
    assert isinstance(eng, SmrConfig)
    assert (eng.mode, eng.paths) == (Mode.BACKUP2, 3)
    # defaults come from the engine's model, not a second copy in the daemon config
    assert eng.reply_wait_ms == SmrConfig().reply_wait_ms


def test_send_buffer_reaches_the_section_unless_it_sets_its_own():
    from manetkit.daemon.sendbuffer import SendBufferSettings

    base = {"address": "10.42.0.1", "protocol": "dsr"}
    default = SendBufferSettings()
    eng = parse_config(base).engine_config()
    assert (eng.send_buffer_packets, eng.send_buffer_timeout_s) == (
        default.send_buffer_packets,
        default.send_buffer_timeout_s,
    )
    # the daemon-wide section shows the engines' defaults (one source)
    assert parse_config(base).send_buffer.packets == default.send_buffer_packets
    eng = parse_config({**base, "send_buffer": {"packets": 7}}).engine_config()
    assert (eng.send_buffer_packets, eng.send_buffer_timeout_s) == (
        7,
        default.send_buffer_timeout_s,
    )
    eng = parse_config(
        {**base, "send_buffer": {"packets": 7, "timeout_s": 5}, "dsr": {"send_buffer_packets": 9}}
    ).engine_config()
    assert (eng.send_buffer_packets, eng.send_buffer_timeout_s) == (9, 5.0)


def test_protocol_atra_section_wins_over_the_top_level_one():
    cfg = parse_config(
        {
            "address": "10.42.0.1",
            "protocol": "aodv",
            "atra": {"rfp": True},
            "aodv": {"atra": {"pre": True}},
        }
    )
    atra = cfg.engine_config().atra
    assert atra.pre and not atra.rfp


def test_check_prints_the_running_section_in_full_and_others_as_written():
    eff = parse_config(
        {"address": "10.42.0.1", "protocol": "smr", "dsr": {"salvage": False}}
    ).effective()
    assert eff["dsr"] == {"salvage": False}
    assert eff["aodv"] == {}
    assert eff["smr"]["mode"] == "backup1" and "route_cache_timeout_s" in eff["smr"]
    yaml.safe_dump(eff)  # plain data


# --- lab up --set reaches the daemons' protocol sections -----------------------------


def _lab_daemon_config(overrides: dict[str, str]) -> dict:
    from manetkit.lab import stacks
    from manetkit.lab.scenario import SHIPPED_SCENARIOS, load_scenario

    sc = load_scenario(SHIPPED_SCENARIOS / "ladder-6.yaml", overrides)
    return stacks.daemon_config("ladder", "n1", sc.stack, stacks.scenario_daemon_extra(sc))


def test_lab_set_reaches_the_protocol_sections():
    cfg = _lab_daemon_config(
        {"stack": "smr", "proxy": "bus", "smr.mode": "backup2", "smr.max_path_age_s": "5"}
    )
    eng = parse_config(cfg).engine_config()
    assert (str(eng.mode), eng.max_path_age_s, eng.bus) == ("backup2", 5.0, True)
    cfg = _lab_daemon_config({"stack": "aodv", "aodv.active_route_timeout_ms": "1500"})
    assert parse_config(cfg).engine_config().active_route_timeout_ms == 1500


def test_lab_set_with_a_bad_value_is_refused_by_field():
    cfg = _lab_daemon_config({"stack": "smr", "smr.mode": "backup3"})
    with pytest.raises(UserError, match=r"  smr\.mode: Input should be 'concurrent'"):
        parse_config(cfg, "generated daemon config for n1")


@pytest.mark.parametrize("protocol", ["aodv", "dsr", "smr"])
def test_the_running_engine_gets_the_daemon_wide_send_buffer(protocol):
    from manetkit.daemon.neighbours import NeighbourTable
    from manetkit.daemon.shell import make_engine

    cfg = parse_config(
        {
            "address": "10.42.0.1",
            "protocol": protocol,
            "send_buffer": {"packets": 7, "timeout_s": 2},
        }
    )
    buf = make_engine(cfg, NeighbourTable()).send_buffer
    assert (buf.max_packets, buf.timeout) == (7, 2.0)


@pytest.mark.parametrize("protocol", ["aodv", "dsr", "smr"])
def test_lab_override_keeps_top_level_atra_and_send_buffer(tmp_path, protocol):
    """``--lab NAME`` (how the lab starts daemons) re-reads the config: the top-level
    atra:/send_buffer: must still reach the running engine (a full re-dump once marked
    the section's default atra: as set and it shadowed ``lab up --set atra.rfp=true``)."""
    import argparse

    from manetkit.daemon.cli import effective_config
    from manetkit.daemon.neighbours import NeighbourTable
    from manetkit.daemon.shell import make_engine

    p = tmp_path / "c.yaml"
    p.write_text(
        f"address: 10.42.0.1\nprotocol: {protocol}\nlink_sensing: {{backend: lab}}\n"
        "lab: {name: old, node: n1}\natra: {rfp: true}\nsend_buffer: {packets: 9}\n"
    )
    cfg = effective_config(argparse.Namespace(config=str(p), lab="new"))
    assert cfg.lab is not None and cfg.lab.name == "new"
    engine = make_engine(cfg, NeighbourTable())
    assert engine.status()["atra"]["rfp"] is True
    assert engine.send_buffer.max_packets == 9
