"""The example configs in configs/ are valid: each passes the real CLI's ``--check``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
DAEMON = ["laptop-dsr.yaml", "laptop-aodv.yaml", "gateway.yaml"]
PROXY = ["proxy-elfn.yaml", "gateway-proxy.yaml"]


def check(kind: str, name: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "manetkit.cli", kind, "--config", str(CONFIGS / name), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_every_shipped_config_is_covered():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(DAEMON + PROXY)


@pytest.mark.parametrize("name", DAEMON)
def test_daemon_config_checks(name):
    r = check("daemon", name)
    assert r.returncode == 0, r.stderr
    assert "protocol" in r.stdout


@pytest.mark.parametrize("name", PROXY)
def test_proxy_config_checks(name):
    r = check("proxy", name)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mode"] == "elfn"


def test_check_refuses_a_broken_config(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        (CONFIGS / "laptop-dsr.yaml").read_text().replace("protocol: dsr", "protocol: olsr")
    )
    r = subprocess.run(
        [sys.executable, "-m", "manetkit.cli", "daemon", "--config", str(bad), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode != 0 and "protocol" in r.stderr
