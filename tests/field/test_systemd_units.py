"""The shipped systemd units pass ``systemd-analyze verify`` and node-up installs them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from manetkit.field import units

ANALYZE = shutil.which("systemd-analyze")
MANETKIT = shutil.which("manetkit")


@pytest.mark.skipif(not ANALYZE or not MANETKIT, reason="needs systemd-analyze and manetkit")
def test_shipped_units_verify_clean(tmp_path: Path):
    files = []
    for name in units.NAMES:
        # verify checks that ExecStart's binary exists: point it at this installation's
        f = tmp_path / f"{name}.service"
        f.write_text(units.render(name, manetkit=MANETKIT))
        files.append(str(f))
    # the template once as an instance too (%i expanded)
    inst = tmp_path / "manetkit-ibss@wlan0.service"
    inst.write_text(units.render("manetkit-ibss@", manetkit=MANETKIT))
    done = subprocess.run(
        [ANALYZE, "verify", *files, str(inst)], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    ours = [line for line in done.stderr.splitlines() if "manetkit" in line]
    assert not ours, ours  # no warning about our units (unknown keys, bad paths)


def test_a_broken_unit_fails_verification(tmp_path: Path):
    """The check above can fail: a typo in a directive and a missing binary are caught."""
    if not ANALYZE:
        pytest.skip("needs systemd-analyze")
    bad = tmp_path / "manetkit-daemon.service"
    bad.write_text(units.text("manetkit-daemon").replace("Restart=", "Restrat="))
    done = subprocess.run([ANALYZE, "verify", str(bad)], capture_output=True, text=True)
    assert done.returncode != 0 or "Restrat" in done.stderr


def test_units_as_shipped_and_rendered():
    daemon = units.text("manetkit-daemon")
    assert "ExecStart=/usr/local/bin/manetkit daemon --config /etc/manetkit/daemon.yaml" in daemon
    assert "ExecStartPre=/usr/local/bin/manetkit daemon --check" in daemon
    proxy = units.render("manetkit-proxy", manetkit="/opt/mk/bin/manetkit", config_dir="/c/")
    assert "ExecStart=/opt/mk/bin/manetkit proxy --config /c/proxy.yaml" in proxy
    assert "After=network.target manetkit-daemon.service" in proxy
    ibss = units.text("manetkit-ibss@")
    assert "ExecStart=/usr/local/bin/manetkit field ibss-up -i %i $IBSS_ARGS" in ibss
    with pytest.raises(ValueError, match="no unit"):
        units.text("manetkit-nothing")


def test_field_ibss_subcommands_match_the_scripts():
    """``manetkit field ibss-up`` (the unit's command) plans what field-tests/ibss-up does."""
    args = ["-i", "wlan7", "--freq", "2437", "--dry-run"]
    via_cli = subprocess.run(
        ["manetkit", "field", "ibss-up", *args], capture_output=True, text=True
    )
    via_script = subprocess.run(
        ["python3", "field-tests/ibss-up", *args],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert via_cli.returncode == 0, via_cli.stderr
    assert via_cli.stdout == via_script.stdout and "ibss join" in via_cli.stdout
    bad = subprocess.run(
        ["manetkit", "field", "ibss-up", "-i", "wlan7", "--freq", "9999", "--dry-run"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "--freq" in bad.stderr
