"""A lab whose sockets would be longer than AF_UNIX's 107 bytes is refused before anything
is made, with the path and the reason (it used to fail later: the medium did not start)."""

from __future__ import annotations

from pathlib import Path

import pytest

from manetkit import paths
from manetkit.lab import netns
from tests.helpers.lab import SCENARIOS, manetkit, unique_lab

pytestmark = pytest.mark.netns  # nothing is made when the check works; a lab if not


def test_the_limit_is_107_bytes(tmp_path: Path):
    base = tmp_path / ("d" * (200 - len(str(tmp_path))))
    ok = Path(str(base)[: paths.SUN_PATH_MAX])
    paths.check_socket_paths([Path("/run/x.sock"), ok])
    over = Path(str(base)[: paths.SUN_PATH_MAX + 1])
    with pytest.raises(ValueError, match=rf"{over} is 108 bytes; AF_UNIX allows at most 107"):
        paths.check_socket_paths([Path("/run/x.sock"), over])
    paths.check_socket_paths([])


def test_lab_up_refuses_a_rundir_that_makes_socket_paths_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # <rundir>/labs/<lab>/nodes/nI/radio-ctl.sock must fit in 107 bytes: this one is 90
    rundir = tmp_path / ("r" * max(1, 90 - len(str(tmp_path))))
    rundir.mkdir()
    monkeypatch.setenv("MANETKIT_RUNDIR", str(rundir))
    lab = unique_lab("ls")
    r = manetkit(
        "lab", "up", str(SCENARIOS / "chain-3.yaml"), "--name", lab, check=False, timeout=60
    )
    assert r.returncode == 2, r.stdout + r.stderr
    want = paths.radio_control_socket(lab, "n1")  # the first of the longest
    assert f"socket path {want} is" in r.stderr and "AF_UNIX allows at most 107" in r.stderr
    assert "MANETKIT_RUNDIR" in r.stderr
    assert not netns.list_names(f"{paths.NETNS_PREFIX}{lab}-")  # nothing was made
    assert not paths.lab_dir(lab).exists()
