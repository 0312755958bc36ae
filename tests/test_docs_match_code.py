"""The docs say what the code does: README's configuration tables carry the models'
defaults, every repository file the code and the docs name exists, and no file cites a
tracker by number that a reader of the repository cannot see."""

from __future__ import annotations

import re
import subprocess
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from manetkit.daemon.config import DaemonConfig
from manetkit.proxy.config import ProxyConfig

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _table(heading: str) -> list[tuple[str, str]]:
    """(field cell, default cell) of the markdown table under ``heading``."""
    part = README.split(heading, 1)[1]
    rows = []
    for line in part.splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if len(cells) >= 2 and cells[0] not in ("field", "---"):
            rows.append((cells[0], cells[1]))
    assert rows, f"no table under {heading!r}"
    return rows


def _model_of(annotation) -> type[BaseModel] | None:
    for t in (annotation, *typing.get_args(annotation)):
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return None


def _default(model: type[BaseModel], dotted: str):
    """The default of ``a.b.c`` in ``model`` (nested models followed through)."""
    head, _, rest = dotted.partition(".")
    field = model.model_fields[head]
    if rest:
        sub = _model_of(field.annotation)
        assert sub is not None, f"{dotted}: {head} is not a section"
        return _default(sub, rest)
    if field.default_factory is not None:
        return field.default_factory()
    return field.default


def _same(doc: str, value) -> bool:
    if isinstance(value, bool):
        return doc == str(value).lower()
    if isinstance(value, int | float):
        try:
            return float(int(doc, 0) if doc.lower().startswith("0x") else float(doc)) == value
        except ValueError:
            return False
    if isinstance(value, list | tuple | dict | set):
        return doc in ("[]", "{}") and not value
    return doc == str(getattr(value, "value", value))


def _rows(heading: str):
    for names_cell, default_cell in _table(heading):
        names = re.findall(r"`([^`]+)`", names_cell)
        defaults = re.findall(r"`([^`]+)`", default_cell)
        if not names or names[0].endswith(":") or len(defaults) != len(names):
            continue  # a section, or a default in words (required, none, engine defaults)
        base = names[0].rsplit(".", 1)[0] + "." if "." in names[0] else ""
        for name, default in zip(names, defaults, strict=True):
            yield (base + name[1:] if name.startswith(".") else name), default


@pytest.mark.parametrize(
    ("heading", "model"),
    [("### Daemon (`manetkit daemon", DaemonConfig), ("### Proxy (`manetkit proxy", ProxyConfig)],
)
def test_readme_config_tables_carry_the_models_defaults(heading, model):
    checked, wrong = 0, []
    for name, doc in _rows(heading):
        value = _default(model, name)
        checked += 1
        if not _same(doc, value):
            wrong.append(f"{name}: README says {doc}, the model {value!r}")
    assert not wrong, "\n".join(wrong)
    assert checked >= 10


# Paths the docs and the code name: repository files, not examples or generated output.
_PATH = re.compile(
    r"(?<![\w./-])((?:manetkit|docs|configs|tests|tools|field-tests|docker|\.ci)/"
    r"[A-Za-z0-9_./@-]*[A-Za-z0-9_])"
)
_PLACEHOLDER = re.compile(r"[<>*{}$]|\.\.\.|/(NAME|DIR|LAB|IF|RUN|N)\b")


def _ignored(path: str) -> bool:
    # "path/" too: a directory pattern (docker/.gitignore's /deps/) matches only that
    done = subprocess.run(
        ["git", "check-ignore", path, f"{path}/"], cwd=ROOT, capture_output=True, text=True
    )
    return bool(done.stdout.strip())


def _named_paths() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    sources = [
        ROOT / "README.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "manetkit").rglob("*.py"),
    ]
    for src in sources:
        for m in _PATH.finditer(src.read_text()):
            path = m.group(1).rstrip(".")
            line_end = src.read_text().find("\n", m.end())
            context = src.read_text()[m.start() : line_end if line_end > 0 else None]
            if _PLACEHOLDER.search(context.split()[0] if context.split() else path):
                continue
            found.setdefault(path, set()).add(str(src.relative_to(ROOT)))
    return found


def _exists(path: str) -> bool:
    p = ROOT / path
    if p.exists() or _ignored(path):
        return True  # a git-ignored path is generated (docker/deps, results/): not a file to keep
    # a dotted module name written as a path without .py, or a package-relative name
    return p.with_suffix(".py").exists() or (ROOT / "manetkit" / path).exists()


def test_every_file_the_code_and_docs_name_exists():
    missing = {p: sorted(s) for p, s in _named_paths().items() if not _exists(p)}
    assert not missing, "\n".join(
        f"{p} (named in {', '.join(s)})" for p, s in sorted(missing.items())
    )


# References to a project tracker by number (an issue or a task, "#" optional) mean nothing
# to a reader of the repository: say what is meant instead. A public tracker is cited by its
# URL (https://github.com/jech/babeld/issues/8), which this does not match.
_TRACKER_REF = re.compile(r"\b(?:issue|task)s? ?#?\d+\b", re.IGNORECASE)
_TEXT_SUFFIXES = {
    # the kinds of prose and config the repository keeps, and the other text it tracks
    *(".py", ".md", ".yaml", ".yml", ".txt", ".setdest", ".toml", ".cfg", ".sh"),
    *(".service", ".cc", ".js", ".html", ".css", ".dot", ".gitignore", ".dockerignore"),
}


def _tracked_text_files() -> list[Path]:
    try:
        done = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git or the repository's history is not available")
    files = []
    for name in filter(None, done.stdout.split("\0")):
        path = ROOT / name
        # extensionless files are scripts (.ci/run, field-tests/ibss-up, docker/build)
        text_kind = path.suffix in _TEXT_SUFFIXES or not path.suffix or name.startswith(".ci/")
        if text_kind and path.is_file():
            files.append(path)
    return files


def _tracker_refs(text: str) -> list[str]:
    found = []
    for m in _TRACKER_REF.finditer(text):
        start = max(text.rfind(c, 0, m.start()) for c in " \t\n(") + 1
        if "/" in text[start : m.start()]:
            continue  # inside a URL or a path: .../issues/8
        found.append(m.group(0))
    return found


def test_no_file_cites_a_tracker_by_number():
    files = _tracked_text_files()
    assert len(files) > 100
    hits = []
    for path in files:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for line_no, line in enumerate(text.splitlines(), 1):
            for ref in _tracker_refs(line):
                hits.append(f"{path.relative_to(ROOT)}:{line_no}: {ref!r}")
    assert not hits, "tracker references (say what is meant instead):\n" + "\n".join(hits)


@pytest.mark.parametrize(
    ("line", "refs"),
    [
        # numbers as f-string fields: this file is checked too
        (f"the comparison's goals (Issue {10})", [f"Issue {10}"]),
        (f"see task {3} and issues #{8}", [f"task {3}", f"issues #{8}"]),
        ("upstream: https://github.com/jech/babeld/issues/8", []),
        ("(https://github.com/openwrt/mt76/issues/41)", []),
        ("a task per leg, 3 issues left", []),
    ],
)
def test_tracker_reference_pattern(line, refs):
    assert _tracker_refs(line) == refs
