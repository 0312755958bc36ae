"""mesh0 deleted under the daemon and no TUN to be had: the daemon says why and exits 2
(manetkit.daemon.shell: _tun_lost -> _recreate_tun -> _die), undoing what it set up.

A kernel that refuses a TUN is made for the daemon alone: ``ip netns exec`` gives it a
mount namespace of its own (slave of the host's), and ``/dev/null`` is bound over its
``/dev/net/tun`` there after it started, so opening a TUN again fails (TUNSETIFF on
``/dev/null``: ENOTTY). The host's ``/dev/net/tun`` is untouched; the namespace goes
with the process."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from tests.daemon.vethnet import VethMesh, sh

pytestmark = pytest.mark.netns


@pytest.fixture
def one(tmp_path):
    with VethMesh(f"mktml{os.getpid() % 1000}", 1, tmp_path) as mesh:
        yield mesh


def test_mesh0_deleted_and_not_re_creatable_exits_2_with_the_reason(one):
    proc = one.start(1)
    pid = proc.pid  # `ip netns exec` execs the daemon: this is its pid
    assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
    sh("nsenter", "-t", str(pid), "-m", "mount", "--bind", "/dev/null", "/dev/net/tun")
    host = os.stat("/dev/net/tun")
    assert stat.S_ISCHR(host.st_mode) and os.major(host.st_rdev) == 10  # not ours to break
    one.run(1, "ip", "link", "del", "mesh0")
    try:
        code = proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the daemon did not exit: {one.log(1)}")
    log = one.log(1)
    assert code == 2, log
    assert "mesh0 was deleted (" in log and "re-creating it" in log
    assert "mesh0 was deleted and cannot be re-created: [Errno 25]" in log  # ENOTTY
    assert "manetkit: mesh0 was deleted and cannot be re-created" in log  # the CLI's line
    assert "Traceback" not in log
    one.procs.pop(1)
    assert "mesh0" not in one.run(1, "ip", "-o", "link", "show").stdout
    assert "10.42." not in one.run(1, "ip", "route").stdout
    assert not one.sock(1).exists()  # the event socket went with it
