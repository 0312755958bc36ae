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


def test_the_kernel_download_directory_is_never_world_writable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """apt-get download runs in a directory only apt's sandbox user may write (as root, a
    world-writable one lets any local user plant files or links for root to move)."""
    import os
    import pwd
    import stat

    from manetkit.field import vmrig

    seen: list[os.stat_result] = []

    def fake_run(argv: list[str], **kw: object) -> subprocess.CompletedProcess:
        if argv[:2] == ["apt-get", "download"]:
            seen.append(os.stat(str(kw["cwd"])))
            raise vmrig.UserError("stop here")
        raise AssertionError(argv)

    monkeypatch.setattr(vmrig, "kernel_package", lambda: "linux-image-6.1.0-1-amd64")
    monkeypatch.setattr(vmrig, "_run", fake_run)
    with pytest.raises(UserError, match="stop here"):
        vmrig.fetch_kernel(tmp_path)
    (st,) = seen
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0, oct(st.st_mode)
    users = {u.pw_name: u.pw_uid for u in pwd.getpwall()}
    if os.geteuid() == 0 and vmrig.APT_SANDBOX_USER in users:
        assert st.st_uid == users[vmrig.APT_SANDBOX_USER]
