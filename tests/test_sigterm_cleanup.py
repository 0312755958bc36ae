"""A test run killed with SIGTERM (a CI timeout, ``kill`` of the job) still cleans up:
tests/conftest.py turns the signal into KeyboardInterrupt, so fixtures tear down."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from manetkit.lab import netns

pytestmark = pytest.mark.netns

ROOT = Path(__file__).resolve().parents[1]


def test_sigterm_tears_down_a_running_tests_namespace(tmp_path: Path) -> None:
    name = f"mkt-sigterm-{os.getpid()}"
    ready = tmp_path / "ready"
    (tmp_path / "test_victim.py").write_text(
        textwrap.dedent(f"""
        import subprocess, time
        import pytest

        @pytest.fixture
        def namespace():
            subprocess.run(["ip", "netns", "add", "{name}"], check=True)
            try:
                yield
            finally:
                subprocess.run(["ip", "netns", "del", "{name}"], check=True)

        def test_waits_to_be_killed(namespace):
            open("{ready}", "w").close()
            time.sleep(120)
        """)
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        for _ in range(600):  # up to 60 s for pytest to start and the fixture to run
            if ready.exists() or proc.poll() is not None:
                break
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.1)
        assert ready.exists(), proc.communicate()[0] if proc.poll() is not None else "no start"
        assert name in netns.list_names("mkt-sigterm")
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert "KeyboardInterrupt" in out or "signal 15" in out, out
        assert name not in netns.list_names("mkt-sigterm"), "the fixture did not tear down"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
