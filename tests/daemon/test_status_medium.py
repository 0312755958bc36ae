"""``manetkit status --medium``: a lab medium's fidelity table, read from its control socket."""

from __future__ import annotations

import argparse
import json
import socket
import threading

from manetkit import paths
from manetkit.daemon import statuscli

STATS = {
    "ok": True,
    "t": 12.5,
    "radios": "shared",
    "scheduling": "fifo 10",
    "attached": ["n1", "n2"],
    "fidelity": {
        "lag_ms": {
            "since_start": {"outputs": 40, "p50": 0.42, "p99": 1.33, "max": 1.5},
            "last_10s": {"outputs": 0, "p50": None, "p99": None, "max": None},
        },
        "drops": {"modelled": {"queue_drops": 2}, "unmodelled": {"radio_tap_kernel_drops": 3}},
    },
}


def _serve_one(path, reply: dict) -> tuple[threading.Thread, list[dict]]:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    asked: list[dict] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn, srv:
            asked.append(json.loads(conn.makefile("rb").readline()))
            conn.sendall(json.dumps(reply).encode() + b"\n")

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t, asked


def test_status_medium_prints_lag_and_drops(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MANETKIT_RUNDIR", str(tmp_path))
    path = paths.medium_control_socket("lab1")
    path.parent.mkdir(parents=True)
    t, asked = _serve_one(path, STATS)
    parser = argparse.ArgumentParser()
    statuscli.register(parser)
    assert statuscli.main(parser.parse_args(["--medium", "--lab", "lab1"])) == 0
    t.join(5)
    out = capsys.readouterr().out
    assert asked == [{"cmd": "stats"}]
    assert "radios shared" in out and "scheduling fifo 10" in out and "attached 2" in out
    assert "since start" in out and "1.33" in out
    assert "radio_tap_kernel_drops 3" in out and "queue_drops 2" in out
