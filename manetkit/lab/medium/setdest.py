"""ns-2 movement files (``setdest`` / BonnMotion's ns2 export).

Accepted lines (anything else is refused, every bad line listed with its number):

    $node_(i) set X_ 12.5                    initial x (Y_ likewise; Z_ is ignored)
    $ns_ at 3.0 "$node_(i) setdest x y v"    from t = 3 s move towards (x, y) at v m/s
    $god_ ...  /  $ns_ at t "$god_ ..."      ignored (ns-2's GOD bookkeeping)
    # comment, blank lines                   ignored

Node ids: ns-2's setdest numbers nodes from 0, so does BonnMotion's export; some
hand-written files start at 1. With ``base: auto`` (the default) ids are 0-based if
``node_(0)`` appears anywhere in the file, else 1-based; ``base: 0`` or ``base: 1`` fixes
it. 0-based ``node_(0)`` is the lab's ``n1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from manetkit.errors import UserError

_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_SET = re.compile(rf"^\$node_\((\d+)\)\s+set\s+([XYZ])_\s+{_NUM}\s*$")
_AT = re.compile(
    rf"^\$ns_\s+at\s+{_NUM}\s+\"\s*\$node_\((\d+)\)\s+setdest\s+{_NUM}\s+{_NUM}\s+{_NUM}\s*\"\s*;?\s*$"
)
_GOD = re.compile(r"^(\$god_\b|\$ns_\s+at\s+\S+\s+\"\s*\$god_\b)")


@dataclass(frozen=True, slots=True)
class SetdestMove:
    t: float
    node: int  # 0-based lab index (n1 = 0)
    x: float
    y: float
    speed: float


@dataclass
class SetdestTrace:
    """Initial positions and timed moves, with lab node indexes (0-based: n1 = 0)."""

    initial: dict[int, tuple[float, float]] = field(default_factory=dict)
    moves: list[SetdestMove] = field(default_factory=list)


def parse_setdest(
    text: str, n_nodes: int, base: int | str = "auto", source: str = "<setdest>"
) -> SetdestTrace:
    """Parse a movement file; raises :class:`UserError` listing every malformed line."""
    sets: list[tuple[int, int, str, float]] = []  # (lineno, id, axis, value)
    ats: list[tuple[int, float, int, float, float, float]] = []
    bad: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or _GOD.match(line):
            continue
        if m := _SET.match(line):
            sets.append((lineno, int(m[1]), m[2], float(m[3])))
        elif m := _AT.match(line):
            t, nid, x, y, v = float(m[1]), int(m[2]), float(m[3]), float(m[4]), float(m[5])
            if t < 0 or v < 0:
                bad.append(f"line {lineno}: negative time or speed: {line}")
                continue
            ats.append((lineno, t, nid, x, y, v))
        else:
            bad.append(f"line {lineno}: not a setdest line: {line[:80]}")
    ids = [s[1] for s in sets] + [a[2] for a in ats]
    if base == "auto":
        base = 0 if 0 in ids else 1
    base = int(base)
    trace = SetdestTrace()
    pending: dict[int, dict[str, float]] = {}

    def index(lineno: int, nid: int) -> int | None:
        i = nid - base
        if not 0 <= i < n_nodes:
            bad.append(
                f"line {lineno}: node_({nid}) is outside the scenario's {n_nodes} nodes "
                f"(ids are {base}-based: node_({base})..node_({base + n_nodes - 1}))"
            )
            return None
        return i

    for lineno, nid, axis, value in sets:
        i = index(lineno, nid)
        if i is not None and axis != "Z":
            pending.setdefault(i, {})[axis] = value
    for lineno, t, nid, x, y, v in ats:
        i = index(lineno, nid)
        if i is not None:
            trace.moves.append(SetdestMove(t, i, x, y, v))
    for i, xy in pending.items():
        if "X" not in xy or "Y" not in xy:
            bad.append(
                f"node_({i + base}) has {'X_' if 'X' in xy else 'Y_'} but not both X_ and Y_"
            )
        else:
            trace.initial[i] = (xy["X"], xy["Y"])
    missing = [f"n{i + 1}" for i in range(n_nodes) if i not in trace.initial]
    if missing and not bad:
        bad.append(
            f"no initial position (set X_/Y_) for {', '.join(missing[:10])}"
            + (" ..." if len(missing) > 10 else "")
        )
    if bad:
        raise UserError(f"{source}: malformed movement file:\n  " + "\n  ".join(bad))
    trace.moves.sort(key=lambda m: m.t)
    return trace


def load_setdest(path: Path, n_nodes: int, base: int | str = "auto") -> SetdestTrace:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"setdest file {path}: {exc.strerror or exc}") from None
    return parse_setdest(text, n_nodes, base, str(path))
