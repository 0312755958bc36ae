"""What the hwsim rig's guest keeps visible over its tmpfs (no VM needed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from manetkit.errors import UserError
from manetkit.field.vmrig import GUEST_INIT, keep_cmdline, kept_paths


def test_a_virtualenv_under_tmp_is_kept_with_the_checkout() -> None:
    """A CI clone and a virtualenv under /tmp: both bind-mounted back ("python3: not
    found" in the guest otherwise); nested and visible paths are not listed."""
    paths = [
        Path("/tmp/ci/clone"),
        Path("/var/tmp/venv"),
        Path("/var/tmp/venv/bin"),
        Path("/var/tmp/venv/lib/python3.11/site-packages"),
        Path("/usr/lib/python3/dist-packages"),
    ]
    assert kept_paths(paths) == [Path("/tmp/ci/clone"), Path("/var/tmp/venv")]
    assert keep_cmdline(kept_paths(paths)) == "mk_keep=/tmp/ci/clone,/var/tmp/venv"
    assert keep_cmdline(kept_paths([Path("/work/main"), Path("/usr")])) == ""


def test_a_path_the_kernel_command_line_cannot_carry_is_refused() -> None:
    with pytest.raises(UserError, match="comma or a space"):
        keep_cmdline([Path("/tmp/my venv")])


def test_the_guest_reads_every_kept_path() -> None:
    """guest-init.sh's own parsing line, run on a sample /proc/cmdline."""
    line = next(x for x in GUEST_INIT.read_text().splitlines() if x.startswith("KEEP="))
    cmdline = "console=ttyS0 quiet mk_keep=/tmp/ci/clone,/var/tmp/venv"
    out = subprocess.run(
        ["sh", "-c", f'{line.replace("/proc/cmdline", "/dev/stdin")}; echo "$KEEP"'],
        input=cmdline,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == ["/tmp/ci/clone", "/var/tmp/venv"]
