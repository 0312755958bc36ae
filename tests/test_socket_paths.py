"""A unix socket path over AF_UNIX's 107 bytes is refused where it is given, naming the
config field or option and the reason, instead of a bare OSError ("AF_UNIX path too
long") from bind() or connect() once the process runs: the daemon's ``event_socket``
and the proxy's ``status_socket`` / ``daemon_socket`` (``--check`` time), the medium's ``--socket``/``--control`` and the radio's ``--medium``
and own sockets (``lab medium`` / ``lab radio`` run alone; ``lab up`` checks the whole lab
first: tests/lab/test_lab_sockets.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from manetkit import paths
from manetkit.daemon.config import parse_config
from manetkit.errors import UserError
from manetkit.lab import radio
from manetkit.lab.medium import server as medium
from manetkit.proxy import config as proxy_config
from tests.helpers.lab import SCENARIOS

LONG = "/tmp/" + "d" * 100 + "/x.sock"  # 112 bytes


def test_a_path_is_refused_over_107_bytes_naming_what_it_is():
    ok = "/" + "o" * 106
    assert paths.check_socket_path(ok, "event_socket") == Path(ok)
    with pytest.raises(ValueError, match=r"^--socket /o{107} is 108 bytes; AF_UNIX allows at most 107 \(unix\(7\)\)$"):  # fmt: skip
        paths.check_socket_path("/" + "o" * 107, "--socket")
    assert len(os.fsencode("/" + "é" * 54)) == 109  # bytes count, not characters (55)
    with pytest.raises(ValueError, match="is 109 bytes"):
        paths.check_socket_path("/" + "é" * 54)


def test_the_daemon_config_refuses_a_long_event_socket():
    with pytest.raises(UserError, match=rf"event_socket: path {LONG} is 112 bytes; AF_UNIX"):
        parse_config({"address": "10.42.0.1", "event_socket": LONG})
    assert parse_config({"address": "10.42.0.1", "event_socket": "/run/x.sock"})


@pytest.mark.parametrize("field", ["status_socket", "daemon_socket"])
def test_the_proxy_config_refuses_a_long_socket(field: str):
    base = {"listen_address": "10.42.0.1"}
    with pytest.raises(UserError, match=rf"{field}: path {LONG} is 112 bytes; AF_UNIX"):
        proxy_config.parse_config({**base, field: LONG})
    assert proxy_config.parse_config({**base, "daemon_socket": None}).daemon_socket is None


def medium_args(*extra: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    medium.add_arguments(p)
    return p.parse_args([str(SCENARIOS / "chain-3.yaml"), "--lab", "t", *extra])


@pytest.mark.parametrize("option", ["--socket", "--control"])
def test_the_medium_refuses_a_long_socket_option(option: str):
    with pytest.raises(UserError, match=rf"^{option} {LONG} is 112 bytes; AF_UNIX"):
        medium.server_from_args(medium_args(option, LONG))


def long_rundir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rundir = tmp_path / ("r" * max(1, 100 - len(str(tmp_path))))
    monkeypatch.setenv("MANETKIT_RUNDIR", str(rundir))
    return rundir


def test_the_medium_refuses_default_paths_under_a_long_rundir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    rundir = long_rundir(tmp_path, monkeypatch)
    with pytest.raises(UserError, match=r"--socket \(default\) .* MANETKIT_RUNDIR") as exc:
        medium.server_from_args(medium_args())
    assert str(paths.medium_socket("t")) in str(exc.value) and str(rundir) in str(exc.value)
    # an explicit short socket: the control socket's default is the one refused
    with pytest.raises(UserError, match=r"--control \(default\)"):
        medium.server_from_args(medium_args("--socket", "/run/m.sock"))


def radio_args(*extra: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    radio.add_arguments(p)
    return p.parse_args(["--lab", "t", "--node", "n1", *extra])


def test_the_radio_refuses_long_paths_before_making_its_interface(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    def no_interface(self):
        raise AssertionError("the interface was made before the check")

    monkeypatch.setattr(radio.Radio, "create_interface", no_interface)
    with pytest.raises(UserError, match=rf"^--medium {LONG} is 112 bytes"):
        radio.run(radio_args("--medium", LONG))
    long_rundir(tmp_path, monkeypatch)
    with pytest.raises(UserError, match=r"radio socket .*radio-ctl.sock is \d+ bytes.*MANETKIT_RUNDIR"):  # fmt: skip
        radio.run(radio_args("--medium-udp", "127.0.0.1:9"))
