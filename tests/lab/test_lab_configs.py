"""Per-node daemon and proxy settings given to ``lab up`` explicitly (``--daemon-config``,
``--proxy-config``; ``nodes.up``'s ``daemon_config`` / ``proxy_config``): merged into
every node's generated config, the scenario's protocol sections over them, the fields
the lab sets per node refused. No namespaces: the configs are written, not run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from manetkit.errors import UserError
from manetkit.lab import stacks
from tests.helpers.lab import SCENARIOS, manetkit


def _config(spec: stacks.ProcessSpec) -> dict:
    return yaml.safe_load(Path(spec.argv[spec.argv.index("--config") + 1]).read_text())


def test_both_configs_reach_every_node_and_the_node_fields_stay(tmp_path, monkeypatch):
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path))
    scenario = SimpleNamespace(stack="smr", proxy="elfn", smr={"mode": "backup1"})
    daemon = {"smr": {"mode": "backup2", "paths": 2}, "log_level": "debug"}
    proxy = {"partition_timeout": 10}
    for node in ("n1", "n7"):
        d, p = stacks.node_processes("lc", scenario, node, daemon, proxy)
        dc, pc = _config(d), _config(p)
        assert dc["address"] == str(stacks.node_address(node))
        assert dc["event_socket"].endswith(f"/{node}/events.sock")
        assert dc["log_level"] == "debug"
        assert dc["smr"] == {"mode": "backup1", "paths": 2}  # the scenario's section wins
        assert pc["partition_timeout"] == 10 and pc["daemon_socket"] == dc["event_socket"]
    assert daemon == {"smr": {"mode": "backup2", "paths": 2}, "log_level": "debug"}  # not changed


@pytest.mark.parametrize(
    ("daemon", "proxy", "error"),
    [
        ({"address": "10.42.0.9"}, None, "daemon_config: address are set per node by the lab"),
        ({"lab": {}, "event_socket": "/x"}, None, "lab, event_socket are set per node"),
        (None, {"status_socket": "/x"}, "proxy_config: status_socket are set per node"),
        (["dsr"], None, "daemon_config: expected a mapping of daemon config fields"),
    ],
)
def test_a_per_node_field_or_a_non_mapping_is_refused(tmp_path, monkeypatch, daemon, proxy, error):
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path))
    scenario = SimpleNamespace(stack="dsr", proxy="elfn")
    with pytest.raises(UserError, match=error):
        stacks.node_processes("lc", scenario, "n1", daemon, proxy)


def test_a_config_file_error_names_the_option_and_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("event_socket: /tmp/x.sock\n")
    with pytest.raises(UserError, match=f"--daemon-config {bad}: event_socket are set per"):
        stacks.load_extra(bad, "daemon")
    with pytest.raises(UserError, match="--proxy-config .*missing.yaml: .*No such file"):
        stacks.load_extra(tmp_path / "missing.yaml", "proxy")
    (tmp_path / "empty.yaml").write_text("")
    assert stacks.load_extra(tmp_path / "empty.yaml", "proxy") == {}


def test_lab_up_refuses_a_bad_config_before_making_anything(tmp_path, monkeypatch):
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path / "run"))
    bad = tmp_path / "proxy.yaml"
    bad.write_text("daemon_socket: /x\n")
    done = manetkit("lab", "up", str(SCENARIOS / "chain-3.yaml"), "--name", "lcbad",
                    "--proxy-config", str(bad), check=False)  # fmt: skip
    assert done.returncode != 0 and "daemon_socket are set per node" in done.stderr
    assert not (tmp_path / "run" / "labs" / "lcbad").exists()
