"""manetkit's package import graph, from the source (``ast``), and the layering rules.

Used by ``tests/test_layering.py`` (the rules) and, as a dev tool, to draw
``docs/architecture.png``:

    python3 tools/importgraph.py            # needs graphviz's ``dot``

Nodes are layers (``manetkit.daemon.engines``, ``manetkit.lab.medium``, the neutral
top-level modules ...); an edge A -> B means some module of A imports one of B,
at module level or inside a function (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "manetkit"

# Top-level modules every layer may use; they import no layer themselves.
NEUTRAL = {
    "configfile", "console", "daemonstatus", "errors", "events", "extras", "jsonlines",
    "keyfile", "macaddr", "paths", "procs", "radioevents", "runner", "stats", "tuntap",
}  # fmt: skip

# (importer prefix, forbidden prefix, why)
RULES: list[tuple[str, str, str]] = [
    ("manetkit.daemon", "manetkit.lab", "the daemon runs on real nodes: it must not need the lab"),
    ("manetkit.daemon", "manetkit.proxy", "the proxy sits on the daemon, not the other way"),
    ("manetkit.daemon", "manetkit.bench", "benchmarks drive the daemon"),
    ("manetkit.proxy", "manetkit.daemon", "the proxy talks to the daemon over the event socket"),
    ("manetkit.proxy", "manetkit.lab", "the proxy runs on real nodes"),
    ("manetkit.lab.medium", "manetkit.lab.scenario", "one place builds the medium from a scenario"),
    ("manetkit.lab", "manetkit.daemon", "the lab starts daemons as processes, by config"),
] + [
    (f"manetkit.{n}", f"manetkit.{layer}", "neutral modules import no layer")
    for n in sorted(NEUTRAL)
    for layer in ("daemon", "proxy", "lab", "bench", "field")
]
# manetkit.experiment drives labs and uses the bench's writer: nothing imports it.
RULES += [
    (f"manetkit.{part}", "manetkit.experiment", "experiments drive the lab; nothing needs them")
    for part in ("daemon", "proxy", "lab", "bench", "field", *(f"{n}" for n in sorted(NEUTRAL)))
]
# The sans-I/O cores (docs/style.md, "The core contract"): an exact module name, or a
# package prefix ending in "." (every module below it). Add every new core here.
CORES = {
    "manetkit.daemon.engines.",
    "manetkit.daemon.wire.",
    "manetkit.daemon.admission",
    "manetkit.daemon.neighbours",
    "manetkit.daemon.sendbuffer",
    "manetkit.daemon.flowcount",
    "manetkit.daemon.linksense.hysteresis",
    "manetkit.proxy.session",
    "manetkit.proxy.policy",
    "manetkit.proxy.frames",
    "manetkit.proxy.modes",
    "manetkit.proxy.channel",
    "manetkit.lab.medium.mac",
    "manetkit.lab.medium.macbase",
    "manetkit.lab.medium.airtime",
    "manetkit.lab.medium.propagation",
    "manetkit.lab.medium.mobility",
    "manetkit.lab.medium.topology",
    "manetkit.lab.medium.lag",
    "manetkit.lab.medium.realistic",
    "manetkit.lab.medium.channel",
    "manetkit.lab.medium.pathloss",
    "manetkit.lab.medium.shadowing",
    "manetkit.lab.medium.fading",
    "manetkit.lab.medium.power",
    "manetkit.lab.medium.errormodels",
    "manetkit.lab.medium.ratecontrol",
    "manetkit.lab.medium.queues",
    "manetkit.lab.medium.profiles",
    "manetkit.lab.medium.curves",
    "manetkit.lab.map.core",
}
# What a core never imports: event loops, sockets, processes, threads, the kernel's
# netlink, and the clock (a core is given ``now``; it reads no clock).
IO_MODULES = (
    "asyncio", "socket", "select", "selectors", "subprocess", "fcntl", "threading",
    "pyroute2", "time",
)  # fmt: skip


def is_core(mod: str) -> bool:
    return any(
        mod == c or (c.endswith(".") and (mod.startswith(c) or mod == c[:-1])) for c in CORES
    )


# Known, documented exceptions: (importer module, imported module).
ALLOWED = {
    # lab up (and lab compose) validate the daemon config they generate before starting
    # anything.
    ("manetkit.lab.stacks", "manetkit.daemon.config"),
    ("manetkit.lab.compose", "manetkit.daemon.config"),
    # The medium process's entry point reads the scenario file it is started with.
    ("manetkit.lab.medium.server", "manetkit.lab.scenario"),
}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    if not is_pkg:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Every manetkit module -> the modules it imports (absolute names)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        mod = module_name(path)
        is_pkg = path.name == "__init__.py"
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node)
                out.add(base)
                # "from manetkit.lab import paths" imports the module manetkit.lab.paths
                out.update(f"{base}.{a.name}" for a in node.names if _is_module(f"{base}.{a.name}"))
        graph[mod] = out
    return graph


def _is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (ROOT / rel).with_suffix(".py").exists() or (ROOT / rel / "__init__.py").exists()


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(graph: dict[str, set[str]] | None = None) -> list[str]:
    """One line per import that breaks a rule in :data:`RULES`, or a core (:data:`CORES`)
    importing I/O (:data:`IO_MODULES`)."""
    graph = imports() if graph is None else graph
    bad = []
    for mod, targets in sorted(graph.items()):
        for src, dst, why in RULES:
            if not _under(mod, src):
                continue
            for t in sorted(targets):
                if _under(t, dst) and (mod, t) not in ALLOWED:
                    bad.append(f"{mod} imports {t}: {why}")
        if is_core(mod):
            for t in sorted(targets):
                if any(_under(t, io) for io in IO_MODULES) and (mod, t) not in ALLOWED:
                    bad.append(f"{mod} imports {t}: a core is sans-I/O (docs/style.md)")
    return bad


# Import cycles that are known and documented: each a set of modules.
ALLOWED_CYCLES: list[set[str]] = []


def cycles(graph: dict[str, set[str]] | None = None) -> list[set[str]]:
    """The import cycles between manetkit's modules (strongly connected components of
    more than one module; Tarjan's algorithm), lazy imports included."""
    graph = imports() if graph is None else graph
    nodes = sorted(graph)
    edges = {m: sorted(t for t in graph[m] if t in graph and t != m) for m in nodes}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(comp)

    for v in nodes:
        if v not in index:
            visit(v)
    return found


# sans-I/O tables and policies the engines and link sensing share, drawn apart from the
# daemon's asyncio shell.
DAEMON_TABLES = {
    "manetkit.daemon.neighbours", "manetkit.daemon.sendbuffer", "manetkit.daemon.admission",
}  # fmt: skip


def layer(mod: str) -> str | None:
    """The box a module is drawn in: a sub-package, or 'neutral'."""
    if mod in DAEMON_TABLES:
        return "manetkit.daemon (tables)"
    parts = mod.split(".")
    if len(parts) < 2 or parts[0] != "manetkit":
        return None
    if len(parts) == 2:
        return "manetkit (neutral)" if parts[1] in NEUTRAL else None
    if parts[:3] == ["manetkit", "daemon", "engines"] and len(parts) >= 4 and _is_pkg(parts[:4]):
        return ".".join(parts[:4])  # an engine's package (dsr, aodv, smr, shared, atra)
    if parts[1] in ("daemon", "lab") and len(parts) >= 3 and _is_pkg(parts[:3]):
        return ".".join(parts[:3])
    return ".".join(parts[:2])


def _is_pkg(parts: list[str]) -> bool:
    return (ROOT / Path(*parts) / "__init__.py").exists()


def layer_edges(graph: dict[str, set[str]] | None = None) -> set[tuple[str, str]]:
    graph = imports() if graph is None else graph
    edges = set()
    for mod, targets in graph.items():
        a = layer(mod)
        for t in targets:
            b = layer(t)
            if a and b and a != b:
                edges.add((a, b))
    return edges


ENGINES = "manetkit.daemon.engines"


def dot_source(edges: set[tuple[str, str]]) -> str:
    lines = [
        "digraph manetkit {",
        '  rankdir=TB; node [shape=box, fontname="Helvetica", fontsize=11];',
        '  "manetkit (neutral)" [style=filled, fillcolor="#eeeeee"];',
    ]
    # The routing engines' packages drawn inside one box: the API (base), each
    # protocol, the pieces they share.
    engines = sorted({n for e in edges for n in e if _under(n, ENGINES)})
    if engines:
        lines.append(f'  subgraph cluster_engines {{ label="{ENGINES}"; fontname="Helvetica";')
        for n in engines:
            short = "API (base, static)" if n == ENGINES else n[len(ENGINES) + 1 :]
            lines.append(f'    "{n}" [label="{short}"];')
        lines.append("  }")
    lines += [f'  "{a}" -> "{b}";' for a, b in sorted(edges)]
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    bad = violations()
    for line in bad:
        print(line, file=sys.stderr)
    src = dot_source(layer_edges())
    out = ROOT / "docs" / "architecture.png"
    subprocess.run(["dot", "-Tpng", "-Gdpi=110", "-o", str(out)], input=src.encode(), check=True)
    (ROOT / "docs" / "architecture.dot").write_text(src)
    print(f"wrote {out}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
