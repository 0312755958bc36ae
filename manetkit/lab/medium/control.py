"""Client of the medium's control socket (JSON lines, one reply per request).

Requests: ``{"cmd": "ping"}``, ``{"cmd": "positions"}``, ``{"cmd": "neighbours",
"node": "n1"}``, ``{"cmd": "links"}``, ``{"cmd": "stats"}``, ``{"cmd": "fidelity"}``,
``{"cmd": "move", "node": "n3", "x": .., "y": .., "speed": null}``,
``{"cmd": "link", "a": "n1", "b": "n2", "state": "down"}``.
Replies carry ``"ok": true`` or ``"ok": false, "error": "..."``. See docs/medium.md.
"""

from __future__ import annotations

from pathlib import Path

from manetkit import jsonlines, paths
from manetkit.errors import UserError


def control_path(lab_or_path: str | Path) -> Path:
    """A lab name gives that lab's control socket; anything with a '/' is a path."""
    s = str(lab_or_path)
    return Path(s) if "/" in s else paths.medium_control_socket(s)


def control(lab_or_path: str | Path, request: dict, timeout: float = 5.0) -> dict:
    """Send one request, return the reply. Raises UserError if the medium is not running."""
    path = control_path(lab_or_path)
    try:
        return jsonlines.request(path, request, timeout)
    except PermissionError:
        raise UserError(
            f"permission denied on {path}: the medium's control socket is for root "
            "and the medium's --control-group"
        ) from None
    except (FileNotFoundError, ConnectionRefusedError):
        raise UserError(f"no medium is listening on {path} (is the lab up?)") from None
    except TimeoutError:
        raise UserError(f"the medium on {path} did not answer within {timeout} s") from None
    except ConnectionError:
        raise UserError(f"the medium on {path} closed the connection without a reply") from None
