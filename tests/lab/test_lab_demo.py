"""The README's main job: `manetkit lab demo` sends ping, HTTP and iperf3 through the mesh."""

import subprocess
import sys

import pytest

from manetkit.lab import netns

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def test_demo_carries_traffic_and_cleans_up(tmp_path, monkeypatch):
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path / "run"))
    name = f"dm{tmp_path.name[-6:].replace('-', '').lower()}"[:12]
    try:
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "manetkit.cli",
                "lab",
                "demo",
                "--name",
                name,
                "--duration",
                "2",
                "--size-kb",
                "32",
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    finally:
        subprocess.run(
            [sys.executable, "-m", "manetkit.cli", "lab", "down", "--name", name],
            capture_output=True,
            timeout=60,
        )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "sha256 ok" in out
    assert "10.42.0.1 -> 10.42.0.2 -> 10.42.0.3 -> 10.42.0.4 -> 10.42.0.5" in out.replace("\n", " ")
    assert not netns.list_names(f"mk-{name}-")
