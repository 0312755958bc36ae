"""An accepted leg as the proxy server's hello step sees it (manetkit/proxy/server.py), in
place of a socket: the address it was dialled to and the bytes the server sent back."""

from __future__ import annotations

from manetkit.proxy import frames as fr


class FakeLeg:
    """An accepted leg dialled to ``here``; records what the server sends on it."""

    def __init__(self, here: str = "10.42.0.4") -> None:
        self.here = here
        self.sent = bytearray()

    def getsockname(self) -> tuple[str, int]:
        return (self.here, 4242)

    def send(self, data: bytes) -> int:
        self.sent += data
        return len(data)

    def reply(self) -> fr.Frame | None:
        """The first frame the server sent back, if a whole one."""
        reader = fr.FrameReader()
        reader.feed(bytes(self.sent))
        return reader.next_frame()
