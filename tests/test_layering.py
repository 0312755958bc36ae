"""Dependencies point down (issue 13): checked on the real imports, found with ``ast``.

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


def test_the_committed_picture_matches_the_imports():
    """docs/architecture.dot (rendered to docs/architecture.png) is today's layer graph:
    regenerate both with ``python3 tools/importgraph.py`` when layers change."""
    committed = (importgraph.ROOT / "docs" / "architecture.dot").read_text()
    assert committed == importgraph.dot_source(importgraph.layer_edges())
