"""Dependencies point down, cores do no I/O, no module imports itself back: checked on
the real imports, found with ``ast``.

The rules and the walker are ``tools/importgraph.py``'s (which also draws
docs/architecture.png from the same graph); these tests fail on any import that breaks
them, lazy imports inside functions included.
"""

from __future__ import annotations

from tools import importgraph


def test_no_import_breaks_the_layering():
    assert importgraph.violations() == []


def test_the_walker_sees_lazy_and_relative_imports():
    graph = importgraph.imports()
    # A lazy import inside a function (daemon/shell.py's link-sensing backends) is seen.
    assert "manetkit.daemon.linksense.lab" in graph["manetkit.daemon.shell"]
    # "from manetkit import paths" names the module manetkit.paths.
    assert "manetkit.paths" in graph["manetkit.daemon.statuscli"]


def test_a_forbidden_import_is_reported_with_its_reason():
    graph = {
        "manetkit.daemon.shell": {"manetkit.lab.paths"},
        "manetkit.proxy.relay": {"manetkit.daemon.eventsocket", "manetkit.events"},
        "manetkit.proxy.client": {"manetkit.jsonlines"},
    }
    bad = importgraph.violations(graph)
    assert len(bad) == 2
    assert bad[0].startswith("manetkit.daemon.shell imports manetkit.lab.paths: the daemon")
    assert bad[1].startswith("manetkit.proxy.relay imports manetkit.daemon.eventsocket")


def test_a_core_importing_io_or_the_clock_is_reported():
    graph = {
        "manetkit.daemon.engines.dsr.routes": {"time", "manetkit.daemon.wire.dsr"},
        "manetkit.lab.medium.mac": {"asyncio.events"},
        "manetkit.daemon.linksense.hysteresis": {"pyroute2.netlink"},
        "manetkit.daemon.shell": {"asyncio", "time", "socket"},  # a shell: allowed
    }
    bad = importgraph.violations(graph)
    assert [b.split(":")[0] for b in bad] == [
        "manetkit.daemon.engines.dsr.routes imports time",
        "manetkit.daemon.linksense.hysteresis imports pyroute2.netlink",
        "manetkit.lab.medium.mac imports asyncio.events",
    ]
    assert all(b.endswith("a core is sans-I/O (docs/style.md)") for b in bad)


def test_every_core_named_exists_and_new_engine_modules_are_cores():
    graph = importgraph.imports()
    for core in importgraph.CORES:
        name = core.rstrip(".")
        assert name in graph, f"{core} is listed as a core but is no module"
    assert importgraph.is_core("manetkit.daemon.engines.aodv.discovery")
    assert importgraph.is_core("manetkit.daemon.engines")
    assert not importgraph.is_core("manetkit.daemon.shell")


def test_no_import_cycles():
    found = importgraph.cycles()
    assert [c for c in found if c not in importgraph.ALLOWED_CYCLES] == []
    graph = {"a": {"b"}, "b": {"c", "x"}, "c": {"a"}, "d": {"a"}}
    assert importgraph.cycles(graph) == [{"a", "b", "c"}]


def test_the_committed_picture_matches_the_imports():
    """docs/architecture.dot (rendered to docs/architecture.png) is today's layer graph:
    regenerate both with ``python3 tools/importgraph.py`` when layers change."""
    committed = (importgraph.ROOT / "docs" / "architecture.dot").read_text()
    assert committed == importgraph.dot_source(importgraph.layer_edges())
