"""What the kernel says about a lab node's TCP connections: ``ss -tin`` in its namespace.

One reader for the experiment's ``retrans`` plug-in and ``bench proxy``: the raw text of
the connections to one peer port (:func:`connection_ss`) and each socket's ``key:value``
fields (:func:`ss_sockets`; values as ``ss`` prints them, e.g. ``retrans:0/14``,
``rtt:120.5/10``, so each reader takes the part it needs).
"""

from __future__ import annotations

import re
import subprocess

_FIELD = re.compile(r"\b([a-z_]+):(\S+)")


def connection_ss(netns: str, peer: str, port: int, *, established: bool = False) -> str:
    """``ss -tin`` of the TCP connections in ``netns`` to ``peer``:``port`` (only the
    established ones with ``established``)."""
    state = ["state", "established"] if established else []
    argv = ["ip", "netns", "exec", netns, "ss", "-tin", *state, "dst", peer,
            "dport", "=", f":{port}"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=20).stdout


def ss_sockets(text: str) -> list[dict[str, str]]:
    """The ``key:value`` fields of each socket's info line in ``ss -ti`` output (the lines
    that list ``segs_out``), in order."""
    out = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "segs_out" in fields:
            out.append(fields)
    return out


def first_number(value: str) -> float:
    """``12`` of ``12``, ``120.5`` of ``120.5/10`` (ss's ``rtt:avg/var``)."""
    return float(value.split("/", 1)[0])
