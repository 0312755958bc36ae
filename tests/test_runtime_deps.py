"""A field node's install: the daemon and the proxy need no numpy, matplotlib or scapy."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import importgraph  # noqa: E402

HEAVY = ("numpy", "matplotlib", "scapy", "aiohttp")
# A meta-path finder that makes the heavy packages unimportable, as on a laptop that
# installed `pip install manetkit` without extras.
BLOCK = (
    "import sys\n"
    "class _Block:\n"
    "    def find_spec(self, name, path=None, target=None):\n"
    f"        if name.split('.')[0] in {HEAVY!r}:\n"
    "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
    "sys.meta_path.insert(0, _Block())\n"
    "from manetkit.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_core_dependencies_leave_the_heavy_ones_to_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    assert not [h for h in HEAVY if h in core]
    extras = project["optional-dependencies"]
    assert "numpy" in " ".join(extras["lab"]) and "matplotlib" in " ".join(extras["experiments"])
    assert "aiohttp" in " ".join(extras["lab"])


def test_nothing_the_daemon_or_proxy_imports_needs_them():
    graph = importgraph.imports()
    seen, todo = set(), [m for m in graph if m.startswith(("manetkit.daemon", "manetkit.proxy"))]
    while todo:
        mod = todo.pop()
        if mod in seen or mod not in graph:
            continue
        seen.add(mod)
        todo += [m for m in graph[mod] if m.startswith("manetkit")]
    bad = {m: sorted(i for i in graph[m] if i.split(".")[0] in HEAVY) for m in seen}
    assert not {m: i for m, i in bad.items() if i}
    assert "manetkit.daemon.shell" in seen and "manetkit.proxy.server" in seen


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", BLOCK, *argv], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("part", "config"),
    [
        ("daemon", "address: 10.42.0.1\nprotocol: dsr\nradio_interface: wlan0\n"),
        ("proxy", "mesh_prefix: 10.42.0.0/16\nmode: elfn\n"),
    ],
)
def test_daemon_and_proxy_start_without_them(tmp_path: Path, part: str, config: str):
    f = tmp_path / f"{part}.yaml"
    f.write_text(config)
    done = _run(part, "--check", "--config", str(f))
    assert done.returncode == 0, done.stderr
    assert _run("--help").returncode == 0


def test_a_part_that_needs_an_extra_says_which():
    done = _run("lab", "status")
    assert done.returncode == 2
    assert "pip install 'manetkit[lab]'" in done.stderr and "Traceback" not in done.stderr
    done = _run("lab", "map")
    assert done.returncode == 2
    assert "pip install 'manetkit[lab]'" in done.stderr and "Traceback" not in done.stderr
