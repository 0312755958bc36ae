"""One-shot requests to manetkit's monitoring sockets (unix stream, one JSON per line).

The daemon's event socket, the proxy's status socket, the lab radio's and the medium's
control sockets all speak this way (babeld's local socket is the model): a client
writes one JSON object and a newline, the server answers with one line.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any


def request(path: str | Path, cmd: dict[str, Any], timeout: float = 3.0) -> dict[str, Any]:
    """Send ``cmd``, return the parsed reply line.

    Raises ``OSError`` (no server, timeout), ``ConnectionError`` (closed without a
    reply) or ``ValueError`` (a reply that is not JSON).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(json.dumps(cmd).encode() + b"\n")
        with s.makefile("rb") as f:
            line = f.readline()
    if not line:
        raise ConnectionError(f"{path} closed the connection without a reply")
    return json.loads(line)
