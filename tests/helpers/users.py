"""Talking to a JSON-lines socket as another user (``setpriv``), for the access tests."""

from __future__ import annotations

import json
import subprocess
import sys


def as_user(uid: int, gid: int, path, cmds: list[dict]) -> list:
    """Send ``cmds`` on one connection from a child process running as uid/gid."""
    code = (
        "import json, socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except OSError as e:\n"
        "    print(json.dumps({'connect_error': e.errno})); sys.exit()\n"
        "f = s.makefile('rwb')\n"
        "for c in json.loads(sys.argv[2]):\n"
        "    f.write(json.dumps(c).encode() + b'\\n'); f.flush()\n"
        "    print(f.readline().decode().strip())\n"
    )
    out = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups",
         sys.executable, "-c", code, str(path), json.dumps(cmds)],
        capture_output=True, text=True, timeout=20, check=True,
    ).stdout  # fmt: skip
    return [json.loads(line) for line in out.splitlines()]
