"""The medium's end of the radio protocol, played by a test (a real radio talks to it)."""

from __future__ import annotations

import socket

from manetkit import paths
from manetkit.lab import radio
from manetkit.lab.medium import protocol


class FakeMedium:
    """The medium's end of the datagram protocol, driven by the test."""

    def __init__(self, lab: str) -> None:
        path = paths.medium_socket(lab)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(10)
        self.radio_addr: str | None = None

    def recv(self) -> protocol.Message:
        data, addr = self.sock.recvfrom(70000)
        self.radio_addr = addr
        return protocol.parse(data)

    def recv_until(self, kind: type, pred=lambda msg: True) -> protocol.Message:
        while True:
            msg = self.recv()
            if isinstance(msg, kind) and pred(msg):
                return msg

    def send(self, data: bytes) -> None:
        assert self.radio_addr
        self.sock.sendto(data, self.radio_addr)

    def close(self) -> None:
        self.sock.close()


def control(lab: str, req: dict) -> dict:
    return radio.request(paths.radio_control_socket(lab, "n1"), req)
