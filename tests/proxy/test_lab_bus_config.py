"""``lab up --proxy bus`` turns on the daemons' TCP-BuS (docs/proxy.md, "In the lab")."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from manetkit.lab import stacks


@pytest.mark.parametrize(("stack", "proxy", "bus"), [
    ("dsr", "bus", True), ("aodv", "bus", True), ("dsr", "elfn", None), ("aodv", "none", None),
])  # fmt: skip
def test_generated_daemon_config_has_bus_only_with_a_bus_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stack: str, proxy: str, bus: bool | None
) -> None:
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path))
    specs = stacks.node_processes("pxcfg", SimpleNamespace(stack=stack, proxy=proxy), "n2")
    daemon = next(s for s in specs if s.name == "daemon-n2")
    cfg = yaml.safe_load(Path(daemon.argv[daemon.argv.index("--config") + 1]).read_text())
    assert cfg.get(stack, {}).get("bus") is bus


def test_bus_merges_with_the_users_protocol_section(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text("dsr: {broadcast_jitter_ms: 0, bus_rexmt_ms: 100}\n")
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path))
    scenario = SimpleNamespace(stack="dsr", proxy="bus")
    specs = stacks.node_processes("pxcfg", scenario, "n1", stacks.load_extra(extra, "daemon"))
    cfg = yaml.safe_load(Path(specs[0].argv[specs[0].argv.index("--config") + 1]).read_text())
    assert cfg["dsr"] == {"broadcast_jitter_ms": 0, "bus_rexmt_ms": 100, "bus": True}
